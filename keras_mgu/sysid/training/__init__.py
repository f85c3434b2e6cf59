"""Training: one run of a model class on windows of the estimation record, or several at once."""
