"""Choosing: the candidate classes, their restarts, the choice on validation, ensembles, tuning."""
