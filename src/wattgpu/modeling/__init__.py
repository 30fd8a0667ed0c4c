"""Everything that is fitted, saved, registered and served: targets, estimators, the candidate algorithms, the
paper replica, the model folder on disk and the predictor that answers requests."""
