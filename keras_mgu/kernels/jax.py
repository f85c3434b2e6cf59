"""Fused MGU sequence kernel for the jax backend (not written yet)."""

AVAILABLE = False


def mgu_sequence(*args, **kwargs):
    raise NotImplementedError("The fused MGU path is not available on the jax backend yet.")
