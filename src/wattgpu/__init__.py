"""wattgpu: predict LLM inference power and inter-token latency on unseen GPUs and LLMs."""

__version__ = "0.1.0"
