"""Planning with the registered models: resolving what a user names, predicting (through a cache), recommending a
GPU, the case study."""
