"""Physical quantities, each computed in one function. Pure; scalars, numpy arrays and pandas Series alike.

Units are in the names: bytes, GB (1e9 bytes), GB/s, W, s, J.
"""

from __future__ import annotations

import numpy as np

BYTES_FP16 = 2  # bytes per weight or KV value at 16-bit precision
BYTES_8BIT = 1  # bytes per weight or KV value at 8-bit precision (FP8, INT8)
GIB = 2**30
# vLLM's default gpu_memory_utilization: the share of each GPU's memory the engine takes for the weights, the
# activations and the KV cache. Every memory rule (KV-cache fit, offline concurrency, the planner) uses this one.
MEMORY_UTILIZATION = 0.9


def kv_values_per_layer(num_kv_heads, head_dim):
    """Values one token caches in one attention layer: its K and V for every KV head (GQA-aware)."""
    return 2 * num_kv_heads * head_dim


def kv_bytes_per_value(kv_cache_dtype: str | None = None) -> float:
    """Bytes per cached K or V value: 1 where a run states (or a request asks for, `kv_precision`) an 8-bit KV cache
    (kv_cache_dtype fp8, fp8_e4m3, fp8_e5m2, int8), else 2 (bf16, fp16, auto). The weights' precision does not set
    it: vLLM's default kv_cache_dtype `auto` keeps the 16-bit activation dtype under FP8 or 4-bit weights alike (no
    measured run states a quantised KV cache)."""
    dtype = str(kv_cache_dtype or "auto").strip().lower()
    return float(BYTES_8BIT if dtype.startswith("fp8") or dtype == "int8" else BYTES_FP16)


def kv_cache_layout(num_layers, num_attention_heads, num_kv_heads=np.nan, head_dim=np.nan, hidden_size=np.nan,
                    kv_layers=np.nan, values_per_layer=np.nan, sliding_window=np.nan):
    """An LLM's KV cache from its config fields (NaN: not set), as (full_layers, sliding_layers, window_tokens,
    values_per_layer), the inputs of kv_bytes_per_sequence. Scalars or arrays alike.

    - values per layer: `values_per_layer` where set (the catalog's kv_values_per_layer; latent attention caches
      one latent + rope key), else 2 x KV heads (else attention heads) x head dim (else hidden size // attention
      heads); 0 if attention-free (no attention heads);
    - full layers (every token cached): `kv_layers` where set, else every layer without a `sliding_window` and none
      with one (a window on every layer, as Mistral-7B-v0.1);
    - sliding layers (the last `window_tokens` cached): the other layers where a `sliding_window` is set, else none.
    """
    heads = np.asarray(num_attention_heads, dtype=float)
    layers = np.asarray(num_layers, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        dim = np.where(np.isnan(head_dim), np.floor(np.asarray(hidden_size, dtype=float) / heads), head_dim)
    kv_heads = np.where(np.isnan(num_kv_heads), heads, num_kv_heads)
    values = np.where(np.isnan(values_per_layer), kv_values_per_layer(kv_heads, dim), values_per_layer)
    values = np.where(np.isnan(heads), 0.0, values)
    window = np.asarray(sliding_window, dtype=float)
    windowed = ~np.isnan(window)
    full = np.where(np.isnan(kv_layers), np.where(windowed, 0.0, layers), kv_layers)
    sliding = np.where(windowed, layers - full, 0.0)
    return full, sliding, window, values


def kv_bytes_per_token(kv_layers, values_per_layer, bytes_per_value: float = BYTES_FP16):
    """KV cache per token: layers caching the token x values per layer x bytes per value. With every attention
    layer counted (full + sliding), the bytes per token of a context shorter than every sliding window."""
    return kv_layers * values_per_layer * bytes_per_value


def kv_bytes_per_sequence(context_tokens, full_layers, sliding_layers, window_tokens, values_per_layer,
                          bytes_per_value: float = BYTES_FP16, state_values=0.0):
    """KV cache of one sequence at `context_tokens`: values per layer x bytes per value x (full layers x context +
    sliding layers x min(context, window)) + state values x bytes per value. A full-attention layer caches every
    token of the context; a sliding-window layer only the last `window_tokens` (NaN: no window, the whole context);
    a linear-attention or state-space layer (Mamba, Gated DeltaNet) keeps a fixed state per sequence whatever the
    context (`state_values`, the catalog's state_values_per_sequence), read and rewritten every decode step like the
    KV cache. The state is counted at the KV cache's bytes per value (the engines' default cache dtype `auto`; a
    model that asks a float32 state, as Nemotron-H's mamba_ssm_cache_dtype does, holds twice that: not modelled)."""
    context = np.asarray(context_tokens, dtype=float)
    window = np.asarray(window_tokens, dtype=float)
    cached = np.minimum(context, np.where(np.isnan(window), np.inf, window))
    return bytes_per_value * (values_per_layer * (full_layers * context + sliding_layers * cached) + state_values)


def weights_gb(params_b, bytes_per_param: float = BYTES_FP16, expert_params_b=0.0, expert_bytes_per_param=None):
    """Memory the weights take: billions of parameters x bytes each = GB. A mixture of experts whose routed experts
    (`expert_params_b` of the parameters, moe_expert_params_b) are stored at `expert_bytes_per_param` (e.g. NVFP4
    experts, the rest FP8): bytes x params + (expert bytes - bytes) x expert params. Exactly bytes x params where the
    experts' precision is not given or is the same."""
    if expert_bytes_per_param is None:
        return bytes_per_param * params_b
    b, eb = np.asarray(bytes_per_param, dtype=float), np.asarray(expert_bytes_per_param, dtype=float)
    plain = b * params_b
    return np.where(eb == b, plain, plain + (eb - b) * np.asarray(expert_params_b, dtype=float))


def mean_bytes_per_param(params_b, bytes_per_param, expert_params_b=0.0, expert_bytes_per_param=None):
    """Bytes per weight over the whole model (weights_gb / params): `bytes_per_param` itself unless the routed
    experts are stored at another precision."""
    if expert_bytes_per_param is None:
        return bytes_per_param
    b, eb = np.asarray(bytes_per_param, dtype=float), np.asarray(expert_bytes_per_param, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(eb == b, b, weights_gb(params_b, b, expert_params_b, eb) / np.asarray(params_b, dtype=float))


def weight_stream_s(params_b, bandwidth_gb_s):
    """Time to stream the 16-bit weights from memory once (one memory-bound decode step)."""
    return weights_gb(params_b) / bandwidth_gb_s


def compute_s(params_b, tflops):
    """Time to compute one token through `params_b` (a token's active parameters) at peak dense FP16 tensor
    throughput: 2 FLOPs x parameters / FLOP/s (linear_flops_per_token, compute_time_s; attention not counted)."""
    return compute_time_s(linear_flops_per_token(params_b), tflops)


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


def kv_fit_sequences(memory_gb, n_gpus, weights_gb, kv_bytes_per_sequence,
                     utilization: float = MEMORY_UTILIZATION):
    """Sequences whose whole KV cache fits beside the weights in `utilization` of the replica's memory (vLLM's
    gpu_memory_utilization): (utilization x memory x GPUs - weights) / KV bytes of one sequence (its prompt and
    answer, kv_bytes_per_sequence). At least 1 (a sequence that does not fit is swapped or preempted, not run zero at
    a time)."""
    free_bytes = (utilization * np.asarray(memory_gb, dtype=float) * n_gpus - weights_gb) * 1e9
    per_sequence = np.asarray(kv_bytes_per_sequence, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        fit = np.where(per_sequence > 0, free_bytes / per_sequence, np.inf)
    return np.maximum(fit, 1.0)


def experts_touched_fraction(concurrency, experts_per_token, num_experts):
    """Expected share of a MoE layer's experts that a decode step reads when `concurrency` sequences each route
    to `experts_per_token` of `num_experts` uniformly: 1 - (1 - k/E)^C (1 for a dense model)."""
    k, e = np.asarray(experts_per_token, dtype=float), np.asarray(num_experts, dtype=float)
    share = np.where((e > 1) & (k < e), k / e, 1.0)
    return 1.0 - (1.0 - share) ** np.maximum(np.asarray(concurrency, dtype=float), 1.0)


# ------------------------------------------------------------------------------------------------- one decode step
# A decode step of b sequences, each getting one token, takes about (features._workload_features builds the terms)
#
#     ITL(b) = T_weights(b) + b x (T_kv + T_compute + T_comm + T_seq) + T_fixed
#
# T_weights: weights_read_per_step_bytes / the tensor-parallel GPUs' memory bandwidth (read_s); T_kv: one sequence's
# KV cache read; T_compute: flops_per_generated_token at the tensor-parallel GPUs' peak (compute_time_s); T_comm:
# tensor_parallel_bytes_per_token over the interconnect (interconnect_s); T_seq: SEQUENCE_STEP_S, what each running
# sequence costs a step beyond its bytes and FLOPs; T_fixed: fixed_step_s. Left out, stated:
# the per-all-reduce latency under tensor parallelism (NCCL's model of it changes between releases and vLLM's custom
# all-reduce bypasses it: the fixed term's learned weight, which depends on the tensor-parallel degree, carries it)
# and the hand-off of one token's activations between pipeline stages (hidden x 2 bytes per stage: negligible).

FIXED_STEP_S_PER_LAYER = 1e-5  # a scale for per-layer kernel launches and scheduling (the models learn the factor)
# T_seq: what each running sequence costs a decode step beyond its bytes and FLOPs: the engine's per-sequence
# bookkeeping (scheduling, block tables, sampling, detokenising: CPU work that grows with the batch, not with the
# context or the model's size) and the attention kernels' per-sequence minimum. Its size is on no spec sheet; tens of
# microseconds per sequence is its order in vLLM's Python scheduler and sampler, taken as the scale, whose factor the
# step-time model learns per engine and release (modeling.steptime). Without it the fit charged this cost to the KV
# read, and ITL at hundreds of short sequences (Watt Counts' offline runs) inflated the KV term of every long-context
# request. Scaled by the layers instead, it made an 80-layer model's overhead 2.5 x a 32-layer one's; with the same
# step-time weight inputs that scored worse with a lab, a GPU or a (GPU, LLM) pair held out (stop 30's closing note).
SEQUENCE_STEP_S = 3.2e-5
# Megatron-LM tensor parallelism (Shoeybi et al. 2019, arXiv:1909.08053, section 3, figure 3): each transformer layer
# splits its attention and its MLP over the GPUs and sums their partial outputs with one all-reduce each.
ALLREDUCES_PER_LAYER = 2
# The GPU-to-GPU link assumed where a GPU's interconnect bandwidth is not given: PCIe Gen4 x16, 16 GT/s x 16 lanes
# x 128b/130b / 8 = 31.5 GB/s each way, 64 GB/s both ways as NVIDIA's datasheets quote it ("PCIe Gen4: 64GB/s",
# https://www.nvidia.com/en-us/data-center/a100/). Catalog figures follow the same convention (total, both ways).
PCIE_GEN4_X16_GB_S = 64.0


def read_s(bytes_, bandwidth_gb_s):
    """Time to read `bytes_` from memory at `bandwidth_gb_s` (1e9 bytes/s): bytes / (GB/s x 1e9)."""
    return bytes_ / (bandwidth_gb_s * 1e9)


def moe_expert_params_b(total_params_b, active_params_b, experts_per_token, num_experts):
    """All routed experts' parameters X (billions) of a mixture of experts. A token reads the shared weights S and k of
    the E experts: active = S + (k/E) X and total = S + X, so X = (total - active) / (1 - k/E). 0 for a dense model
    (active = total, or E <= 1 or unknown)."""
    total, active = np.asarray(total_params_b, dtype=float), np.asarray(active_params_b, dtype=float)
    k, e = np.asarray(experts_per_token, dtype=float), np.asarray(num_experts, dtype=float)
    moe = (total > active) & (e > 1)
    share = np.where(moe, k / np.where(moe, e, 1.0), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(moe, (total - active) / (1 - share), 0.0)


def weights_read_per_step_bytes(total_params_b, active_params_b, experts_per_token, num_experts, concurrency,
                                bytes_per_param=BYTES_FP16, expert_bytes_per_param=None):
    """Bytes of weights one decode step of `concurrency` sequences reads: every weight once for a dense model,
    bytes per param x 1e9 x total; for a mixture of experts the shared weights and the share of the experts' X
    (moe_expert_params_b) that the step's sequences touch (experts_touched_fraction):
    bytes per param x 1e9 x (total - X + X x touched), the touched experts at `expert_bytes_per_param` where it is
    given (+ (expert bytes - bytes) x 1e9 x X x touched; exactly 0 where it is the same)."""
    total = np.asarray(total_params_b, dtype=float)
    experts = moe_expert_params_b(total, active_params_b, experts_per_token, num_experts)
    moe = experts > 0
    touched = experts_touched_fraction(concurrency, np.where(moe, experts_per_token, 1.0),
                                       np.where(moe, num_experts, 1.0))
    read = bytes_per_param * 1e9 * (total - experts + experts * touched)
    if expert_bytes_per_param is None:
        return read
    b, eb = np.asarray(bytes_per_param, dtype=float), np.asarray(expert_bytes_per_param, dtype=float)
    return np.where(eb == b, read, read + (eb - b) * 1e9 * experts * touched)


def linear_flops_per_token(active_params_b):
    """FLOPs of one token through the weights it reads: a multiply and an add per active parameter,
    2 x active params (billions) x 1e9."""
    return 2 * active_params_b * 1e9


def attention_flops_per_token(attention_layers, num_attention_heads, head_dim, context_tokens):
    """FLOPs of one token's attention over `context_tokens` tokens: per layer and head, QK^T (2 x head_dim x context)
    and attention x V (the same), 2 x 2 x heads x head_dim x context x layers. Every layer is counted at the whole
    context (a sliding-window layer, which attends to fewer tokens once the context outgrows its window, is
    overcounted); 0 for an attention-free LLM (give 0 heads)."""
    return 2 * 2 * num_attention_heads * head_dim * context_tokens * attention_layers


def decode_context_tokens(prompt_tokens, output_tokens):
    """Mean context a generated token attends to: the prompt and, on average over the answer, half of it."""
    return prompt_tokens + output_tokens / 2


def flops_per_generated_token(active_params_b, attention_layers, num_attention_heads, head_dim, prompt_tokens,
                              output_tokens):
    """FLOPs per generated token, with its share of the prompt's prefill (P prompt, A output tokens):

        linear + attention(P + A/2) + P x (linear + attention(P/2)) / A

    linear = linear_flops_per_token(active), attention(c) = attention_flops_per_token(..., c): a generated token
    attends to decode_context_tokens on average; a prompt token (causal) to the P/2 tokens before it on average."""
    linear = linear_flops_per_token(active_params_b)
    decode = linear + attention_flops_per_token(attention_layers, num_attention_heads, head_dim,
                                                decode_context_tokens(prompt_tokens, output_tokens))
    prefill = prompt_tokens * (linear + attention_flops_per_token(attention_layers, num_attention_heads, head_dim,
                                                                   prompt_tokens / 2))
    return decode + prefill / output_tokens


def compute_time_s(flops, tflops):
    """Time to compute `flops` at `tflops` (1e12 FLOP/s; the peak dense FP16 tensor throughput of the GPUs doing it)."""
    return flops / (tflops * 1e12)


def ring_allreduce_bytes_per_gpu(message_bytes, ranks):
    """Bytes each GPU sends (and receives at the same time) in a ring all-reduce of `message_bytes` over `ranks`
    GPUs: a reduce-scatter and an all-gather, (t - 1)/t of the message each, 2 (t - 1)/t x message; 0 on one GPU
    (Patarasuk & Yuan 2009; the "bus bandwidth" of NCCL's tests, nccl-tests doc/PERFORMANCE.md)."""
    t = np.asarray(ranks, dtype=float)
    return 2 * (t - 1) / t * message_bytes


def tensor_parallel_bytes_per_token(num_layers, hidden_size, tensor_parallel, bytes_per_value=BYTES_FP16):
    """Bytes each GPU sends per generated token under tensor parallelism t: ALLREDUCES_PER_LAYER all-reduces per
    layer of the token's activations (hidden x 16-bit values), layers x 2 x 2 (t - 1)/t x hidden x 2 bytes; 0 when
    t = 1. With b sequences in a step each all-reduce carries b tokens, so per sequence this is the same."""
    return num_layers * ALLREDUCES_PER_LAYER * ring_allreduce_bytes_per_gpu(hidden_size * bytes_per_value,
                                                                            tensor_parallel)


def interconnect_s(bytes_per_gpu, interconnect_bandwidth_gb_s):
    """Time for each GPU to send `bytes_per_gpu` over its GPU-to-GPU link while receiving as much. The bandwidth is
    the total of both directions (NVIDIA's NVLink convention, the catalog's interconnect_bandwidth_gb_s), and a ring
    sends one way while it receives the other, so bytes move at half of it: bytes / (bandwidth / 2 x 1e9)."""
    return bytes_per_gpu / (interconnect_bandwidth_gb_s / 2 * 1e9)


def fixed_step_s(num_layers):
    """Per-step kernel launches and scheduling: FIXED_STEP_S_PER_LAYER x layers. A token passes through every layer
    once however many pipeline stages hold them (each stage holds layers / stages), so stages do not multiply it."""
    return FIXED_STEP_S_PER_LAYER * num_layers


def pipeline_stage_s(num_layers, pipeline_parallel):
    """Per decode step, what each pipeline stage beyond the first adds: the hand-off of the activations to the next
    GPU and the synchronisation of that stage's scheduler (vLLM 0.5 - 0.6 run their stages as Ray workers). Its size
    is on no spec sheet; it is taken as one pass of kernel launches over the layers per extra stage,
    FIXED_STEP_S_PER_LAYER x layers x (stages - 1), the scale LLM-Inference-Bench's pipeline-parallel runs support
    (the step-time model learns its factor). 0 without pipeline parallelism."""
    return FIXED_STEP_S_PER_LAYER * num_layers * (np.asarray(pipeline_parallel, dtype=float) - 1)


def running_sequences(requests_in_flight, kv_fit, engine_cap=np.inf):
    """Sequences a decode step runs: the requests in flight, at most as many as the KV cache holds (`kv_fit`,
    kv_fit_sequences at the mean context a running sequence holds) and the engine admits (`engine_cap`, e.g. vLLM's
    max_num_seqs); the others wait for a free slot (their wait is time to first token, not ITL). At least 1 (a step
    runs one sequence even when fewer than one is in flight on average)."""
    c = np.asarray(requests_in_flight, dtype=float)
    return np.maximum(np.minimum(np.minimum(c, kv_fit), engine_cap), 1.0)


def busy_fraction(concurrency, poisson):
    """Share of the time the GPU decodes: a closed batch (`poisson` False) always has a sequence running, 1; under
    Poisson arrivals with mean requests in flight C the count in flight is Poisson, so P(at least one) = 1 - e^-C."""
    c = np.maximum(np.asarray(concurrency, dtype=float), 0.0)
    return np.where(np.asarray(poisson, dtype=bool), 1.0 - np.exp(-c), 1.0)


def memory_step_s(weights_step_s, running, kv_step_per_sequence_s):
    """The time a decode step's bytes take at the GPU's peak memory bandwidth: the weights it reads once and each of
    its `running` sequences' KV cache (an attention-free LLM's NaN KV term reads nothing). No step is faster: the
    floor of an ITL (modeling.targets.Target.limits) and the memory-bound work of a step (step power)."""
    kv = np.nan_to_num(np.asarray(kv_step_per_sequence_s, dtype=float))
    return np.asarray(weights_step_s, dtype=float) + np.asarray(running, dtype=float) * kv


def step_utilisation(memory_s, compute_s, step_s):
    """How hard a decode step drives the GPU: (share of peak memory bandwidth, share of peak FLOP/s) over a step
    that takes `step_s`, from the time its bytes (`memory_s`) and FLOPs (`compute_s`) would take at peak. Each at
    most 1: a step cannot move bytes or FLOPs faster than the spec sheet's peak."""
    step_s = np.asarray(step_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.clip(np.asarray(memory_s, dtype=float) / step_s, 0.0, 1.0),
                np.clip(np.asarray(compute_s, dtype=float) / step_s, 0.0, 1.0))


def step_power_tdp_share(idle_share, memory_share, compute_share, busy, memory_utilisation, compute_utilisation):
    """Mean power per GPU as a share of TDP while decoding: idle + busy x (energy of the bytes moved + of the FLOPs
    done per step) / step time. With energy per byte and per FLOP constant, the dynamic power is proportional to
    the achieved rates, i.e. to the utilisations: idle + busy x (memory share x u_mem + compute share x u_flops),
    where the shares are the power at full bandwidth and at full FLOP/s above idle (as TDP shares). A faster step
    at the same work raises both utilisations, so it draws more watts. Bounded by [idle, 1]: never below idle,
    never above the power limit."""
    dynamic = np.asarray(busy, dtype=float) * (memory_share * memory_utilisation + compute_share * compute_utilisation)
    return np.clip(idle_share + dynamic, idle_share, 1.0)


# ------------------------------------------------------------------------------------------------- the replica's shape
# Expert parallel, DP attention and speculative decoding (request fields `expert_parallel`, `dp_attention`,
# `speculative`; workload.REPLICA_SHAPE). No measured run used them, so a request that does is answered as the
# models' prediction for the same replica without them (tensor parallel over its GPUs, one token per step), times
# replica_itl_ratio: the step time with the inputs over the step time without, from replica_step_s at the same
# requests in flight (features.replica_shape_ratio builds the inputs; modeling.predictor applies it). Per decode
# step of b sequences on a replica of t tensor-parallel GPUs (x pipeline stages, which divide the layers and not the
# step's terms), each GPU with memory bandwidth BW and peak FLOP/s P, with v = draft tokens + 1 tokens verified per
# sequence and a tokens emitted per sequence (v = a = 1 without speculation):
#
#     step = (W(b v) + A (t - 1) [DP]) / (t BW)       weights: every GPU reads its share, the attention's whole [DP]
#          + b x KV / (s BW)                          KV cache read once (the v tokens attend to the same cache)
#          + b x (v F_decode + a F_prefill) / (t P)   compute: each verified token, and the prompt's share per emitted
#          + b x v x C / (I / 2)                      communication over the GPU-to-GPU link I (interconnect_s)
#          + b x T_seq + T_fixed + d x T_draft        per-sequence overhead, launches; the draft model's passes
#
# W(n): weights_read_per_step_bytes at n tokens (a MoE step's tokens touch more experts when each sequence verifies
# v of them); A: attention_weight_bytes; s: kv_shards; C: replica_comm_bytes_per_token; T_draft: draft_pass_s.
# ITL per emitted token = step / a, and a replica's tokens/s = b x a / step. Power: not modelled (the models' power
# at the same requests in flight is kept, and the row's note says so).


def attention_params_from_shape_b(attention_layers, hidden_size, num_attention_heads, head_dim, kv_values_per_layer):
    """Parameters (billions) of the attention projections: per attention layer, Q and O (hidden x heads x head dim
    each) and the projection to what a token caches (hidden x its K and V values per layer, kv_cache_layout's
    `values_per_layer`): layers x hidden x (2 x heads x head dim + values) / 1e9. Exact for multi-head and grouped-
    query attention; for latent attention (MLA) it counts the latent's down-projection (values = latent + rope key)
    but neither Q's low rank nor the latent's up-projections (DeepSeek-V3: 6.5 B by this rule against 11.4 B).
    0 for an attention-free LLM (0 heads and values)."""
    return attention_layers * hidden_size * (2 * num_attention_heads * head_dim + kv_values_per_layer) / 1e9


def dp_attention_params_b(counted_b, attention_layers, hidden_size, num_attention_heads, head_dim, kv_values_per_layer):
    """Parameters (billions) DP attention holds whole on every GPU: `counted_b`, the token-mixing layers counted from
    config.json by rule (catalogs.hf_config.attention_params_b: low-rank queries and outputs, latent up-projections,
    indexers, linear-attention layers), where it is known (not NaN); else the estimate from the attention's shape
    (attention_params_from_shape_b), which misses those (DeepSeek-V4-Pro: 57.3 B by the shape, 19.5 B counted)."""
    counted = np.asarray(counted_b, dtype=float)
    return np.where(np.isnan(counted), attention_params_from_shape_b(attention_layers, hidden_size, num_attention_heads,
                                                                     head_dim, kv_values_per_layer), counted)


def attention_weight_bytes(attention_params_b_, bytes_per_param=BYTES_FP16):
    """Bytes of the attention weights: params (billions) x 1e9 x bytes per weight."""
    return attention_params_b_ * 1e9 * bytes_per_param


def kv_shards(tensor_parallel, num_kv_heads, latent, dp_attention):
    """The GPUs the replica's KV cache is spread over: each GPU holds (and reads per step) the KV cache of all the
    step's sequences / shards. Tensor parallelism splits it by KV head, min(t, KV heads) (with fewer KV heads than
    GPUs each head is replicated on t / heads GPUs); a latent (MLA) caches one latent per token and layer, which
    cannot be split by head: replicated on every GPU, 1. DP attention splits it by sequence, each GPU caching its
    own b / t sequences whole: t. NaN KV heads: t (split evenly)."""
    t = np.asarray(tensor_parallel, dtype=float)
    heads = np.asarray(num_kv_heads, dtype=float)
    by_head = np.where(np.asarray(latent, dtype=bool), 1.0, np.minimum(t, np.where(np.isnan(heads), t, heads)))
    return np.where(np.asarray(dp_attention, dtype=bool), t, np.maximum(by_head, 1.0))


def expert_gpus_per_token(experts_per_token, expert_parallel):
    """Expected distinct GPUs, of the N that hold the routed experts, a token's k experts live on (uniform routing,
    experts spread evenly): N (1 - (1 - 1/N)^k)."""
    n = np.asarray(expert_parallel, dtype=float)
    return n * (1 - (1 - 1 / n) ** np.asarray(experts_per_token, dtype=float))


def expert_parallel_bytes_per_token(moe_layers, hidden_size, expert_parallel, experts_per_token, tensor_parallel,
                                    bytes_per_value=BYTES_FP16):
    """Bytes each GPU sends per token of the step for the MoE blocks under expert parallel N (the all-to-all of
    DeepEP, vLLM and SGLang): a token's hidden state is dispatched to each other GPU holding one of its experts and
    their outputs combined back, 2 x hidden x bytes x expert_gpus_per_token x (N - 1)/N per token; the step's tokens
    spread over the N GPUs, so per GPU / N; and where N < t, the experts' slices over the t / N GPUs that share each
    expert are all-reduced (ring_allreduce_bytes_per_gpu over t / N, 0 when N = t):

        MoE layers x (2 h B g (N - 1) / N^2 + 2 (t/N - 1)/(t/N) h B)

    Every layer of a mixture of experts is counted as a MoE layer (DeepSeek-V3's 3 dense layers of 61: + 5 %)."""
    n = np.asarray(expert_parallel, dtype=float)
    message = hidden_size * bytes_per_value
    all_to_all = 2 * message * expert_gpus_per_token(experts_per_token, n) * (n - 1) / n / n
    return moe_layers * (all_to_all + ring_allreduce_bytes_per_gpu(message, np.asarray(tensor_parallel) / n))


def replica_comm_bytes_per_token(num_layers, hidden_size, tensor_parallel, expert_parallel=1, dp_attention=False,
                                 is_moe=False, experts_per_token=1, bytes_per_value=BYTES_FP16):
    """Bytes each GPU sends per token of the step, per layer: the attention block's all-reduce (Megatron, t GPUs)
    unless DP attention (each GPU attends for its own sequences: nothing to reduce), and the MLP / MoE block's: an
    all-reduce under tensor parallelism; under DP attention the all-gather of the tokens before it and the
    reduce-scatter after move as much as that all-reduce (2 (t - 1)/t x message together); a mixture of experts
    under expert parallel N > 1: expert_parallel_bytes_per_token instead. With N = 1 and no DP attention this is
    tensor_parallel_bytes_per_token exactly."""
    message = hidden_size * bytes_per_value
    reduce = ring_allreduce_bytes_per_gpu(message, tensor_parallel)
    attention = np.where(np.asarray(dp_attention, dtype=bool), 0.0, reduce)
    n = np.asarray(expert_parallel, dtype=float)
    ep = np.asarray(is_moe, dtype=bool) & (n > 1)
    per_layer_ep = np.where(ep, expert_parallel_bytes_per_token(1.0, hidden_size, np.where(ep, n, 1.0),
                                                                experts_per_token, tensor_parallel, bytes_per_value),
                            0.0)
    return num_layers * (attention + np.where(ep, per_layer_ep, reduce))


# Draft layers a speculative method runs per draft token: MTP one multi-token-prediction module (one decoder layer
# of the target and its shared LM head, DeepSeek-V3 report section 2.2); EAGLE one draft decoder layer of the
# target's width and an LM head (EAGLE-3, arXiv:2503.01840); n-gram none (a prompt lookup on the CPU).
DRAFT_LAYERS = {"mtp": 1, "eagle": 1, "ngram": 0}


def draft_pass_s(draft_layers, layer_read_bytes, head_params_b, layer_flops_per_token, batch, tensor_parallel,
                 bandwidth_gb_s, tflops, bytes_per_param=BYTES_FP16):
    """One draft token's pass for the step's `batch` sequences on t GPUs (each at `bandwidth_gb_s`, `tflops`): the
    draft layer's weights and the LM head (vocab x hidden) read once, its FLOPs per sequence, and one layer's
    launches: layers x (read bytes + head bytes) / (t BW) + b x (layer FLOPs + 2 x head params) / (t P) + fixed."""
    head_bytes = head_params_b * 1e9 * bytes_per_param
    reads = read_s(layer_read_bytes + head_bytes, bandwidth_gb_s * tensor_parallel)
    flops = compute_time_s(batch * (layer_flops_per_token + linear_flops_per_token(head_params_b)),
                           tflops * tensor_parallel)
    return draft_layers * (reads + flops + FIXED_STEP_S_PER_LAYER)


def replica_step_s(batch, weights_read_bytes, attention_bytes, kv_bytes_per_sequence, shards, decode_flops,
                   prefill_flops_per_token, comm_bytes_per_token, fixed_s, tensor_parallel, bandwidth_gb_s, tflops,
                   interconnect_gb_s, dp_attention=False, verify_tokens=1.0, accept_length=1.0, draft_tokens=0.0,
                   draft_s=0.0, sequence_s=0.0):
    """One decode step of `batch` sequences (b) on a replica's t tensor-parallel GPUs, each at `bandwidth_gb_s` and
    `tflops` (the formula above this section's functions):

        (W + A (t - 1) [DP]) / (t BW) + b KV / (s BW) + b (v F_decode + a F_prefill) / (t P) + b v C / (I / 2)
        + b T_seq + T_fixed + d T_draft

    (under DP attention the KV term's b / s is at least 1: a GPU holds whole sequences)

    W: `weights_read_bytes` (at b x v tokens); A: `attention_bytes` (read whole on every GPU under DP attention
    instead of a t-th); KV: one sequence's KV bytes read per step; s: `shards`; F_decode: FLOPs of one verified
    token (linear + attention); F_prefill: the prompt's FLOPs per emitted token; C: `comm_bytes_per_token`;
    I: `interconnect_gb_s`; d: `draft_tokens`, each taking `draft_s`; T_seq: `sequence_s` (SEQUENCE_STEP_S)."""
    t = np.asarray(tensor_parallel, dtype=float)
    dp = np.asarray(dp_attention, dtype=bool)
    b, v, a = (np.asarray(x, dtype=float) for x in (batch, verify_tokens, accept_length))
    weights = read_s(weights_read_bytes + np.where(dp, attention_bytes * (t - 1), 0.0), bandwidth_gb_s * t)
    # under DP attention the busiest GPU holds at least one sequence (fewer sequences than GPUs leave some idle)
    held = np.where(dp, np.maximum(b / np.asarray(shards, dtype=float), 1.0) * shards, b)
    kv = read_s(held * kv_bytes_per_sequence, bandwidth_gb_s * shards)
    compute = compute_time_s(b * (v * decode_flops + a * prefill_flops_per_token), tflops * t)
    comm = interconnect_s(b * v * comm_bytes_per_token, interconnect_gb_s)
    return weights + kv + compute + comm + b * sequence_s + fixed_s + draft_tokens * draft_s


def replica_itl_ratio(step_with_s, step_without_s, accept_length=1.0):
    """What the replica's shape does to the ITL: ITL per emitted token = step time / tokens emitted per sequence,
    so ITL(with) / ITL(without) = (step with / accept length) / step without (1 where nothing changes)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(step_with_s, dtype=float) / np.asarray(accept_length, dtype=float) \
            / np.asarray(step_without_s, dtype=float)
