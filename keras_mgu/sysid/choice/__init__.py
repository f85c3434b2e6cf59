"""Choosing: the candidate classes, their restarts scored on validation, the best run or an ensemble."""
