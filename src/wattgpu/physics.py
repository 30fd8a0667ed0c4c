"""Physical quantities, each computed in one function. Pure; scalars, numpy arrays and pandas Series alike.

Units are in the names: bytes, GB (1e9 bytes), GB/s, W, s, J.
"""

from __future__ import annotations

import numpy as np

BYTES_FP16 = 2  # bytes per weight or KV value at 16-bit precision
GIB = 2**30


def kv_values_per_layer(num_kv_heads, head_dim):
    """Values one token caches in one attention layer: its K and V for every KV head (GQA-aware)."""
    return 2 * num_kv_heads * head_dim


def kv_bytes_per_token(kv_layers, values_per_layer, bytes_per_value: float = BYTES_FP16):
    """KV cache per token: the cached values of every layer that caches the context, x bytes per value."""
    return kv_layers * values_per_layer * bytes_per_value


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


def kv_fit_sequences(memory_gb, n_gpus, weights_gb, kv_bytes_per_token, tokens_per_sequence,
                     utilization: float = 0.9):
    """Sequences whose whole KV cache fits beside the weights in `utilization` of the replica's memory (vLLM's
    gpu_memory_utilization): (utilization x memory x GPUs - weights) / (KV bytes per token x tokens per sequence).
    At least 1 (a sequence that does not fit is swapped or preempted, not run zero at a time)."""
    free_bytes = (utilization * np.asarray(memory_gb, dtype=float) * n_gpus - weights_gb) * 1e9
    per_sequence = np.asarray(kv_bytes_per_token, dtype=float) * tokens_per_sequence
    with np.errstate(divide="ignore", invalid="ignore"):
        fit = np.where(per_sequence > 0, free_bytes / per_sequence, np.inf)
    return np.maximum(fit, 1.0)


def experts_touched_fraction(concurrency, experts_per_token, num_experts):
    """Expected share of a MoE layer's experts that a decode step reads when `concurrency` sequences each route
    to `experts_per_token` of `num_experts` uniformly: 1 - (1 - k/E)^C (1 for a dense model)."""
    k, e = np.asarray(experts_per_token, dtype=float), np.asarray(num_experts, dtype=float)
    share = np.where((e > 1) & (k < e), k / e, 1.0)
    return 1.0 - (1.0 - share) ** np.maximum(np.asarray(concurrency, dtype=float), 1.0)
