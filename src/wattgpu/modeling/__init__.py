"""Targets, estimator pipelines and the paper replica."""
