"""Sweeps of the recipe's settings: each trial one ``identify``, so this room stands above it."""
