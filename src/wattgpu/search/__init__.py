"""Nested Optuna search over algorithms and feature sets: candidates, physics-informed model, nested
evaluation and the leaderboard. Stages in wattgpu.stages.search."""
