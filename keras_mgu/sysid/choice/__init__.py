"""Choosing: the candidate classes, their restarts scored on validation, the run or runs kept."""
