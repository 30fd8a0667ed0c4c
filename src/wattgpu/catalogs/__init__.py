"""Catalogs of the things a prediction is about: GPUs (`gpus`) and LLMs, authored from public specs."""
