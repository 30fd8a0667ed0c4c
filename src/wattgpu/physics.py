"""Physical quantities, each computed in one function. Pure; scalars, numpy arrays and pandas Series alike.

Units are in the names: bytes, GB (1e9 bytes), GB/s, W, s, J.
"""

from __future__ import annotations

import numpy as np

BYTES_FP16 = 2  # bytes per weight or KV value at 16-bit precision


def kv_bytes_per_token(num_layers, num_kv_heads, head_dim, bytes_per_value: float = BYTES_FP16):
    """KV cache per token: K and V for every layer, 2 x layers x kv_heads x head_dim x bytes (GQA-aware)."""
    return 2 * num_layers * num_kv_heads * head_dim * bytes_per_value


def weights_gb(params_b, bytes_per_param: float = BYTES_FP16):
    """Memory the weights take: billions of parameters x bytes each = GB."""
    return bytes_per_param * params_b


def weight_stream_s(params_b, bandwidth_gb_s):
    """Time to stream the 16-bit weights from memory once (one memory-bound decode step)."""
    return weights_gb(params_b) / bandwidth_gb_s


def compute_s(params_b, tflops):
    """Time to compute one token at peak dense FP16 tensor throughput: 2 FLOPs x parameters / FLOP/s."""
    return 2 * params_b * 1e9 / (tflops * 1e12)


def roofline_itl_s(params_b, bandwidth_gb_s, batch):
    """The paper's roofline ITL: the weights streamed once per decode step, shared by `batch` sequences."""
    return weight_stream_s(params_b, bandwidth_gb_s) / batch


def load_scaled_tdp_w(tdp_w, rho):
    """The load-scaled TDP baseline: a scenario's share `rho` of the power limit."""
    return rho * tdp_w


def system_tokens_per_s(offline, itl_s, request_rate_per_s, output_tokens):
    """Generated tokens/s of one replica. Offline, ITL is the run's duration over all generated tokens, so
    tokens/s = 1 / ITL; at a Poisson load every request's tokens are generated: rate x output tokens."""
    return np.where(offline, 1.0 / np.asarray(itl_s, dtype=float),
                    np.asarray(request_rate_per_s, dtype=float) * np.asarray(output_tokens, dtype=float))


def energy_per_token_j(power_w_per_gpu, n_gpus, tokens_per_s):
    """Energy per generated token: W per GPU x GPUs of the replica / generated tokens per second."""
    return power_w_per_gpu * n_gpus / tokens_per_s
