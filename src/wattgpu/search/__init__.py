"""The nested Optuna search: folds, objective, studies and the per-fold algorithm selection. Stages in
wattgpu.stages.search; the models it searches over live in wattgpu.modeling."""
