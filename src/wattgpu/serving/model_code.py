"""MLflow "models from code" entry: MLflow runs this file when it loads a wattgpu model.

The target comes from the logged `model_config`, the fitted estimator from the `model_dir` artifact; nothing
of the model is a pickled Python object inside the MLflow artifact.
"""

import mlflow

from wattgpu.serving.pyfunc import WattgpuModel

mlflow.models.set_model(WattgpuModel())
