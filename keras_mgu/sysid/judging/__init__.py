"""Judging a model on measured records: prediction, its band, scores, residuals, evaluation."""
