"""The model classes: each simulates outputs ``y`` from inputs ``u`` and an initial state."""
