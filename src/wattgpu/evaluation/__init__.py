"""Cross-validation regimes, metrics, baselines and the evaluation runner."""
