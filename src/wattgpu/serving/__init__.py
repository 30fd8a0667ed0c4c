"""Serving: the MLflow pyfunc model that answers prediction requests (`mlflow models serve`)."""
