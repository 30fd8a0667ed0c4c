"""The replica's shape (issue 23 item 4): `expert_parallel`, `dp_attention` and `speculative` (with
`spec_draft_tokens`, `spec_accept_length`) in the one request model, the CLI, the batch and the HTTP body; each rule's
error names its field; the physics of each input by hand on DeepSeek-V3's real config.json (multi-head latent
attention, 256 routed experts, 8 per token) on 8 x B200 (the catalog's spec sheet); the answer = the models'
prediction for the replica without them x the physics ratio, applied once (Poisson solver included), flagged; and
the defaults change nothing. The models are FIXTUREs (test_predict.FixtureModel), never fitted ones."""

from __future__ import annotations

import functools
import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tests.code import test_predict
from tests.code.test_predict import LLMS
from wattgpu import paths, physics, workload
from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import LlmCatalog, llm_spec_from_hf_config
from wattgpu.cli import app
from wattgpu.features import engineer, replica_shape_ratio
from wattgpu.modeling import coverage
from wattgpu.request import RequestError, check_workload, validate_batch
from wattgpu.serving.pyfunc import as_requests, request_fields

CONFIGS = paths.project_root() / "data/catalogs/llm_configs"
DSV3 = llm_spec_from_hf_config("deepseek-ai/DeepSeek-V3", json.loads((CONFIGS / "deepseek-ai--DeepSeek-V3.json").read_text()))
# a real config without multi-token-prediction layers
LLAMA = llm_spec_from_hf_config("meta-llama/Meta-Llama-3.1-8B",
                                json.loads((CONFIGS / "meta-llama--Meta-Llama-3.1-8B.json").read_text()))
# a real config whose 40 attention heads share 10 KV heads (vLLM refuses it over 4 GPUs: vllm-project/vllm#16021)
PHI4 = llm_spec_from_hf_config("microsoft/phi-4", json.loads(
    (paths.project_root() / "data/catalogs/reference_configs/microsoft--phi-4.json").read_text()))
GPUS = load_gpu_catalog()
CATALOG = LlmCatalog([*LLMS, DSV3, LLAMA, PHI4])
B200 = GPUS.get("NVIDIA B200")
BASE = {"gpu": "NVIDIA B200", "llm": DSV3.key, "n_gpus": 8, "concurrency": 64, "prompt_tokens": 1000,
        "output_tokens": 200}
DENSE = {**BASE, "llm": "fixture/dense-8b"}
# DeepSeek-V3's latent attention caches kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values per token and layer
LATENT_BYTES_PER_TOKEN = 576 * 61 * 2  # 61 layers, bf16: 70,272 bytes


predictor = functools.partial(test_predict.fixture_predictor, GPUS, CATALOG)
rows = functools.partial(test_predict.fixture_rows, GPUS, CATALOG)
featured = functools.partial(test_predict.fixture_featured, GPUS, CATALOG)


def test_the_real_config_is_what_the_hand_computations_assume():
    assert (DSV3.num_layers, DSV3.hidden_size, DSV3.num_experts, DSV3.experts_per_token) == (61, 7168, 256, 8)
    assert DSV3.kv_values_per_layer == 576 and DSV3.weight_precision == "fp8"
    assert (DSV3.mtp_layers, LLAMA.mtp_layers) == (1, 0)  # num_nextn_predict_layers 1; Llama's config has none
    assert DSV3.kv_cache_bytes_per_token() == LATENT_BYTES_PER_TOKEN
    assert (B200.memory_bandwidth_gb_s, B200.interconnect_bandwidth_gb_s, B200.memory_gb) == (8000.0, 1800.0, 180.0)


# ------------------------------------------------------------------------------------------------- the rules


@pytest.mark.parametrize("request_,field,says", [
    ({**BASE, "expert_parallel": 16}, "expert_parallel", "more than the replica's 8 GPUs"),
    ({**BASE, "n_gpus": 8, "expert_parallel": 3}, "expert_parallel", "does not divide the replica's 8 tensor-parallel"),
    ({**BASE, "n_gpus": 8, "pipeline_parallel": 2, "expert_parallel": 8}, "expert_parallel",
     "does not divide the replica's 4 tensor-parallel GPUs (n_gpus 8 / pipeline_parallel 2)"),
    ({**BASE, "n_gpus": 6, "expert_parallel": 6}, "expert_parallel", "does not divide 'deepseek-ai/DeepSeek-V3''s 256 "
                                                                     "routed experts"),
    ({**DENSE, "expert_parallel": 8}, "expert_parallel", "no routed experts"),  # a dense LLM
    ({**BASE, "llm": "fixture/moe-16b", "expert_parallel": 8}, "expert_parallel", "expert count is not known"),
    ({**BASE, "n_gpus": 1, "dp_attention": True}, "dp_attention", "needs 2 or more tensor-parallel GPUs"),
    ({**DENSE, "n_gpus": 3}, "n_gpus", ("3 tensor-parallel GPUs do not split 'fixture/dense-8b''s 32 attention heads "
                                        "and 8 KV heads evenly: vllm shards attention by whole heads")),
    ({**DENSE, "n_gpus": 6, "pipeline_parallel": 2, "engine": "sglang"}, "n_gpus",
     "3 tensor-parallel GPUs (n_gpus 6 / pipeline_parallel 2) do not split"),
    ({**BASE, "llm": PHI4.key, "n_gpus": 4}, "n_gpus",  # 40 query heads divide by 4, 10 KV heads do not
     ("40 attention heads and 10 KV heads evenly: vllm shards attention by whole heads (each GPU the same number of "
      "query heads, and of KV heads or of copies of one) and refuses it at start-up; tensor-parallel sizes it accepts: "
      "1, 2, 5, 10, 20, 40")),
    ({**BASE, "dp_attention": "maybe"}, "dp_attention", "must be true or false"),
    ({**BASE, "spec_accept_length": 2.0}, "spec_accept_length", "needs `speculative`"),  # no method
    ({**BASE, "speculative": "none", "spec_draft_tokens": 2}, "spec_draft_tokens", "needs `speculative`"),
    ({**BASE, "speculative": "eagle", "spec_accept_length": 1.0}, "spec_accept_length", "must be more than 1"),
    ({**BASE, "speculative": "mtp", "spec_accept_length": 2.5}, "spec_accept_length",
     "exceeds spec_draft_tokens + 1 = 2"),  # MTP drafts 1 token by default
    ({**BASE, "speculative": "eagle", "spec_draft_tokens": 2, "spec_accept_length": 3.5}, "spec_accept_length",
     "exceeds spec_draft_tokens + 1 = 3"),
    ({**BASE, "speculative": "medusa"}, "speculative", "is not one of none, mtp, eagle, ngram"),
    ({**BASE, "speculativ": "mtp"}, "speculativ", "did you mean 'speculative'"),
    ({**BASE, "expert_parallel": 2.5}, "expert_parallel", "whole number"),
    ({**BASE, "llm": LLAMA.key, "speculative": "mtp"}, "speculative",
     "'meta-llama/Meta-Llama-3.1-8B' has none (mtp_layers 0: its config.json sets no num_nextn_predict_layers"),
    ({**BASE, "llm": None, "llm_total_params_b": 8, "llm_num_layers": 32, "llm_hidden_size": 4096, "llm_mtp_layers": 0,
      "speculative": "mtp"}, "speculative", "has none (mtp_layers 0"),
    ({**BASE, "llm_mtp_layers": 1.5}, "llm_mtp_layers", "whole number"),
    ({**BASE, "llm": None, "llm_total_params_b": 8, "llm_num_layers": 32, "llm_hidden_size": 4096,
      "llm_attention_params_b": 9}, "llm_attention_params_b", "exceeds"),
    ({**BASE, "llm": None, "llm_total_params_b": 8, "llm_active_params_b": 1, "llm_num_layers": 32,
      "llm_hidden_size": 4096, "llm_attention_params_b": 2}, "llm_attention_params_b", "exceeds"),
])
def test_a_shape_that_does_not_fit_names_its_field(request_, field, says):
    with pytest.raises(RequestError) as exc:
        rows(request_)
    assert exc.value.field == field and says in str(exc.value)


def test_tensor_parallel_sizes_split_attention_heads_as_vllms_qkv_layer_does():
    # query heads divided by tp; KV heads divided by tp, or tp divided by them where tp >= KV heads (replicas)
    assert workload.head_split_sizes(32, 8) == [1, 2, 4, 8, 16, 32]  # Llama-3.1-8B
    assert workload.head_split_sizes(40, 10) == [1, 2, 5, 10, 20, 40]  # Phi-4: 4 and 8 divide 40, not 10
    assert workload.head_split_sizes(28, 4) == [1, 2, 4, 28]  # Qwen2-7B: 7 and 14 leave KV heads unevenly split
    assert workload.head_split_sizes(40, float("nan")) == [1, 2, 4, 5, 8, 10, 20, 40]  # multi-head: KV = query
    assert not workload.splits_heads(float("nan"), float("nan"), 2)  # heads not known: no layout is judged


def test_a_layout_the_head_rule_does_not_bind_is_answered():
    r = rows({**DENSE, "n_gpus": 3, "pipeline_parallel": 3},  # pipeline stages: tensor parallel 1
             {**DENSE, "n_gpus": 3, "engine": "deepspeed"},  # measured beyond the rule (LLM-Inference-Bench)
             {**DENSE, "n_gpus": 6, "dp_attention": True, "engine": "sglang"},  # attention whole on each GPU
             {**BASE, "llm": PHI4.key, "n_gpus": 2}, {**DENSE, "n_gpus": 16})  # 16 GPUs: each KV head on 2
    assert list(r["tensor_parallel"]) == [1, 3, 6, 2, 16]


def test_mtp_is_answered_where_the_llm_has_mtp_layers_or_their_count_is_not_known():
    spec = {**BASE, "llm": None, "llm_total_params_b": 8, "llm_num_layers": 32, "llm_hidden_size": 4096,
            "speculative": "mtp"}
    r = rows({**BASE, "speculative": "mtp"}, spec, {**spec, "llm_mtp_layers": 2}, {**BASE, "llm": LLAMA.key,
                                                                                 "speculative": "eagle"})
    assert list(r["speculative"]) == ["mtp", "mtp", "mtp", "eagle"]
    assert r["llm_mtp_layers"].tolist()[::2] == [1, 2] and np.isnan(r["llm_mtp_layers"].iloc[1])


def test_a_workload_alone_is_checked_by_the_same_rules():
    check_workload({"concurrency": 4, "n_gpus": 8, "expert_parallel": 8, "dp_attention": True, "speculative": "mtp"})
    with pytest.raises(RequestError, match="expert_parallel"):
        check_workload({"concurrency": 4, "n_gpus": 4, "expert_parallel": 8})
    with pytest.raises(RequestError, match="spec_accept_length"):
        check_workload({"concurrency": 4, "spec_accept_length": 2})


def test_the_defaults_per_method_and_the_resolved_columns():
    r = rows(BASE, {**BASE, "speculative": "MTP"}, {**BASE, "speculative": "eagle"},
             {**BASE, "speculative": "ngram", "spec_draft_tokens": 5, "spec_accept_length": 1.7},
             {**BASE, "dp_attention": "true", "expert_parallel": 8})
    assert list(r["speculative"]) == ["none", "mtp", "eagle", "ngram", "none"]
    assert list(r["spec_draft_tokens"].fillna(0)) == [0, 1, 3, 5, 0]
    assert list(r["spec_accept_length"].fillna(0)) == [0, 1.8, 3.0, 1.7, 0]
    assert list(r["dp_attention"]) == [False] * 4 + [True] and list(r["expert_parallel"]) == [1, 1, 1, 1, 8]
    assert workload.SPECULATIVE == {"mtp": (1, 1.8), "eagle": (3, 3.0), "ngram": (3, 1.5)}


# ------------------------------------------------------------------------------------------------- the physics


def test_dp_attention_splits_mlas_latent_kv_cache_by_sequence_instead_of_replicating_it():
    # tensor parallel 8: a latent cannot be split by head, every GPU caches (and reads) all of it; DP attention: 1/8
    assert physics.kv_shards(8, 128, True, False) == 1.0 and physics.kv_shards(8, 128, True, True) == 8.0
    # grouped-query attention: by KV head under TP (8 KV heads on 16 GPUs: each replicated twice), by sequence under DP
    assert physics.kv_shards(8, 8, False, False) == 8.0 and physics.kv_shards(16, 8, False, False) == 8.0
    assert physics.kv_shards(16, 8, False, True) == 16.0
    # 64 sequences of 1,100 tokens (prompt + half the answer) on 8 x B200: KV bytes each GPU reads per step
    kv = LATENT_BYTES_PER_TOKEN * 1100
    per_gpu_tp, per_gpu_dp = 64 * kv / 1, 64 * kv / 8  # 4.95 GB vs 0.62 GB
    assert per_gpu_tp == pytest.approx(4.947e9, rel=1e-3) and per_gpu_dp == per_gpu_tp / 8
    args = dict(weights_read_bytes=0.0, attention_bytes=0.0, kv_bytes_per_sequence=kv, decode_flops=0.0,
                prefill_flops_per_token=0.0, comm_bytes_per_token=0.0, fixed_s=0.0, tensor_parallel=8,
                bandwidth_gb_s=8000.0, tflops=2250.0, interconnect_gb_s=1800.0)
    assert physics.replica_step_s(64, shards=1, **args) == pytest.approx(per_gpu_tp / 8000e9)
    assert physics.replica_step_s(64, shards=8, dp_attention=True, **args) == pytest.approx(per_gpu_dp / 8000e9)
    # the attention weights are read whole on every GPU under DP attention: + A (t - 1) / (t BW)
    a = 6.5e9
    assert physics.replica_step_s(64, shards=8, dp_attention=True, **{**args, "attention_bytes": a}) - \
        physics.replica_step_s(64, shards=8, dp_attention=True, **args) == pytest.approx(a * 7 / (8 * 8000e9))


def test_dp_attention_holds_the_sequences_the_gpus_memory_fits_whole():
    # 30,000-token prompts offline: today's rule pools the memory and splits the KV cache evenly; DP attention caches
    # each sequence on one GPU beside the whole attention weights (layers x hidden x (2 heads x head dim + 576))
    long = {**BASE, "concurrency": None, "scenario": "offline", "prompt_tokens": 30_000}
    r = rows(long, {**long, "dp_attention": True})
    kv = LATENT_BYTES_PER_TOKEN * 30_200
    weights = 1.0 * DSV3.total_params_b  # GB at FP8
    # attention counted from the config: per layer the low-rank query 7,168 x 1,536 + 1,536 x 128 x (128 + 64), the
    # latent 7,168 x (512 + 64), its up-projections 512 x 128 x (128 + 128) and the output 128 x 128 x 7,168
    per_layer = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168
    attention_gb = 61 * per_layer / 1e9 * 1.0  # FP8
    assert DSV3.attention_params_b == pytest.approx(attention_gb, abs=1e-6)
    assert attention_gb == pytest.approx(11.41, abs=0.01)
    assert r["concurrency"].iloc[0] == pytest.approx((0.9 * 180 * 8 - weights) * 1e9 / kv)
    per_gpu = weights / 8 + attention_gb * 7 / 8
    assert r["concurrency"].iloc[1] == pytest.approx((0.9 * 180 - per_gpu) * 8 * 1e9 / kv)
    assert r["concurrency"].iloc[1] < r["concurrency"].iloc[0]
    # the same LLM given by its fields (as `--llm-config` sends it) carries the counted attention too
    from wattgpu.planning.resolve import llm_fields

    by_fields = {**{k: v for k, v in long.items() if k != "llm"}, **llm_fields(DSV3), "llm_name": "my-deepseek",
                 "dp_attention": True}
    assert by_fields["llm_attention_params_b"] == DSV3.attention_params_b
    assert rows(by_fields)["concurrency"].iloc[0] == pytest.approx(r["concurrency"].iloc[1])


def test_expert_parallel_trades_the_moe_all_reduce_for_an_all_to_all():
    h, n, k, layers = 7168, 8, 8, 61
    tp_bytes = physics.replica_comm_bytes_per_token(layers, h, 8)
    assert tp_bytes == physics.tensor_parallel_bytes_per_token(layers, h, 8)  # the default: today's term exactly
    reduce = 2 * 7 / 8 * h * 2  # one ring all-reduce of a token's 16-bit hidden state over 8 GPUs: 25,088 bytes
    gpus_hit = 8 * (1 - (7 / 8) ** 8)  # distinct GPUs of 8 holding a token's 8 experts: 5.25
    all_to_all = 2 * h * 2 * gpus_hit * 7 / 8 / 8  # dispatch + combine, the remote ones, per GPU: 16,465 bytes
    assert physics.expert_gpus_per_token(k, n) == pytest.approx(gpus_hit)
    ep_bytes = physics.replica_comm_bytes_per_token(layers, h, 8, expert_parallel=8, is_moe=True, experts_per_token=k)
    assert ep_bytes == pytest.approx(layers * (reduce + all_to_all))
    # EP 4 of 8 GPUs: the 2 GPUs sharing each expert's slices all-reduce its output too
    ep4 = physics.replica_comm_bytes_per_token(layers, h, 8, expert_parallel=4, is_moe=True, experts_per_token=k)
    assert ep4 == pytest.approx(layers * (reduce + 2 * h * 2 * 4 * (1 - 0.75 ** 8) * 3 / 4 / 4 + 2 * 0.5 * h * 2))
    # DP attention drops the attention's all-reduce; the gather + scatter around the MLP move one all-reduce's bytes
    assert physics.replica_comm_bytes_per_token(layers, h, 8, dp_attention=True) == pytest.approx(tp_bytes / 2)
    # on the real rows: the ratio is the step with the all-to-all over the step without, at 64 in flight
    f = featured(BASE, {**BASE, "expert_parallel": 8})
    ratio = replica_shape_ratio(f)
    assert ratio[0] == 1.0
    step_without = _step(f.iloc[[0]])
    change = 64 * (ep_bytes - tp_bytes) / (1800e9 / 2)
    assert ratio[1] == pytest.approx((step_without + change) / step_without)


def _step(f: pd.DataFrame) -> float:
    """The step without a shape, by the formula (replica_step_s), from the rows' own terms: DeepSeek-V3 at FP8."""
    b = float(f["concurrency"].iloc[0])
    touched = physics.experts_touched_fraction(b, 8, 256)
    experts = physics.moe_expert_params_b(DSV3.total_params_b, DSV3.active_params_b, 8, 256)
    weights = (DSV3.total_params_b - experts + experts * touched) * 1e9 / (8 * 8000e9)
    kv = b * LATENT_BYTES_PER_TOKEN * 1100 / 8000e9  # the latent replicated: every GPU reads all of it
    linear = 2 * DSV3.active_params_b * 1e9
    attention = lambda c: 4 * 128 * 56 * c * 61  # noqa: E731
    flops = linear + attention(1100) + 1000 * (linear + attention(500)) / 200
    compute = b * flops / (8 * 2250e12)
    comm = b * physics.tensor_parallel_bytes_per_token(61, 7168, 8) / 900e9
    overhead = b * 32e-6  # each running sequence's overhead, 32 us (physics.SEQUENCE_STEP_S)
    return weights + kv + compute + comm + overhead + 61e-5


def test_speculative_itl_is_the_step_ratio_over_the_accept_length():
    f = featured({**BASE, "speculative": "ngram"}, {**BASE, "speculative": "ngram", "spec_accept_length": 3.0},
                 {**BASE, "speculative": "mtp"}, {**BASE, "speculative": "eagle"}, BASE)
    ratio = replica_shape_ratio(f)
    # n-gram (no draft model), 3 drafts: each sequence verifies 4 tokens per step: 4 x the decode FLOPs and the
    # all-reduces, the experts touched by 64 x 4 tokens, the KV cache and the weights read once
    b, v = 64, 4
    experts = physics.moe_expert_params_b(DSV3.total_params_b, DSV3.active_params_b, 8, 256)
    read = lambda n: (DSV3.total_params_b - experts + experts * physics.experts_touched_fraction(n, 8, 256)) \
        * 1e9 / (8 * 8000e9)  # noqa: E731
    linear = 2 * DSV3.active_params_b * 1e9
    attention = lambda c: 4 * 128 * 56 * c * 61  # noqa: E731
    decode, prefill = linear + attention(1100), 1000 * (linear + attention(500)) / 200
    kv = b * LATENT_BYTES_PER_TOKEN * 1100 / 8000e9
    comm = physics.tensor_parallel_bytes_per_token(61, 7168, 8) / 900e9

    def step(v, a):
        return read(b * v) + kv + b * (v * decode + a * prefill) / (8 * 2250e12) + b * v * comm + b * 32e-6 + 61e-5

    without = step(1, 1)
    assert without == pytest.approx(_step(f.iloc[[4]]))
    assert ratio[0] == pytest.approx(step(v, 1.5) / 1.5 / without)
    assert ratio[1] == pytest.approx(step(v, 3.0) / 3.0 / without)
    assert ratio[0] < 1 and ratio[1] < ratio[0] and ratio[4] == 1.0
    # MTP: 1 draft through one of the target's layers (its touched experts) and the LM head (vocab x hidden)
    head = 129_280 * 7168 / 1e9
    draft = (read(b) * 8 * 8000e9 / 61 + head * 1e9) / (8 * 8000e9) \
        + b * 2 * (DSV3.active_params_b / 61 + head) * 1e9 / (8 * 2250e12) + 1e-5
    assert ratio[2] == pytest.approx((step(2, 1.8) + draft) / 1.8 / without)
    # and the served answer: the model's ITL for the replica without x the ratio; tokens/s = b x accept / step
    out = predictor().predict([BASE, {**BASE, "speculative": "mtp"}])
    assert out["itl_s"].iloc[1] == pytest.approx(out["itl_s"].iloc[0] * ratio[2])
    assert out["system_tokens_per_s"].iloc[1] == pytest.approx(64 / (out["itl_s"].iloc[0] * ratio[2]))
    assert out["power_w"].iloc[1] == out["power_w"].iloc[0]  # power: the model's, not modelled


def test_a_poisson_rate_solves_its_requests_in_flight_with_the_adjusted_itl():
    server = {**BASE, "concurrency": None, "scenario": "server", "request_rate_per_s": 0.5}
    out = predictor().predict([server, {**server, "speculative": "eagle"}])
    c = out["concurrency"].to_numpy()
    # Little's law at the fixed point, with each row's own (adjusted) ITL
    np.testing.assert_allclose(c, 0.5 * 200 * out["itl_s"].to_numpy(), rtol=1e-3)
    assert c[1] < c[0]


def test_the_row_is_flagged_with_the_input_and_the_ratio():
    out = predictor().predict([BASE, {**BASE, "expert_parallel": 8, "dp_attention": True, "speculative": "mtp"}])
    note = out["interval"].iloc[1]
    ratio = out["itl_s"].iloc[1] / out["itl_s"].iloc[0]
    assert note.startswith("expert parallel 8, DP attention, mtp speculative decoding (1 draft token, 1.8 tokens per "
                           "step): no source measured them")
    assert f"ITL x {ratio:.3g}" in note and "power is not modelled" in note and out["interval"].iloc[0] == ""
    r = rows(BASE, {**BASE, "dp_attention": True})
    ranges = {"gpu_tdp_w": [100.0, 2000.0]}
    assert coverage.outside_mask(r, ranges).tolist() == [False, True]  # the interval widens as for extrapolation
    assert coverage.outside(r.iloc[1], ranges)[0].startswith("DP attention: no source measured it")


# ------------------------------------------------------------------------------------------------- defaults


def test_the_defaults_change_nothing():
    plain = [BASE, DENSE, {**BASE, "concurrency": None, "scenario": "server_high"},
             {**BASE, "concurrency": None, "scenario": "offline", "prompt_tokens": 30_000}]
    stated = [{**r, "expert_parallel": 1, "dp_attention": False, "speculative": "none"} for r in plain]
    a, b = featured(*plain), featured(*stated)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert (replica_shape_ratio(a) == 1.0).all()
    legacy = engineer(rows(*plain).drop(columns=["expert_parallel", "dp_attention", "speculative",
                                                 "spec_draft_tokens", "spec_accept_length"]), offline_batch=256)
    pd.testing.assert_frame_equal(legacy, a[legacy.columns], check_exact=True)
    p = predictor()
    pd.testing.assert_frame_equal(p.predict(plain), p.predict(stated), check_exact=True)
    # the physics with no shape is today's
    assert physics.replica_comm_bytes_per_token(32, 4096, 4) == physics.tensor_parallel_bytes_per_token(32, 4096, 4)
    assert workload.describe({"concurrency": 4}) == workload.describe({"concurrency": 4, "expert_parallel": 1})


# ------------------------------------------------------------------------------------------------- the entries


def test_predict_and_recommend_help_show_the_shape_options():
    for command in ("predict", "recommend"):
        result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0
        for text in ("--gpus-per-replica", "--expert-parallel", "--dp-attention", "--speculative",
                     "--spec-accept-length", "--spec-draft-tokens", "mtp 1.8"):
            assert text in result.output, (command, text)


def test_the_cli_passes_the_shape_into_the_workload():
    w = workload.workload(concurrency=8, n_gpus=8, expert_parallel=8, dp_attention=True, speculative="mtp",
                          spec_accept_length=1.9)
    assert w == {"concurrency": 8, "n_gpus": 8, "expert_parallel": 8, "dp_attention": True, "speculative": "mtp",
                 "spec_accept_length": 1.9}
    assert "dp_attention" not in workload.workload(concurrency=8, dp_attention=False)  # the flag's off: absent
    assert workload.describe(w).endswith("8 GPUs per replica, expert parallel 8, DP attention, mtp speculative "
                                         "decoding (1 draft token, 1.9 tokens per step), vllm 0.14.1, bf16")


def test_a_batch_with_a_bad_row_answers_the_good_rows():
    # a CSV read into a frame: empty cells NaN (absent), the flag column object (True / NaN)
    frame = pd.DataFrame([{**BASE, "expert_parallel": 8}, {**DENSE, "expert_parallel": 8},
                          {**BASE, "dp_attention": True}, {**BASE, "speculative": "ngram", "spec_accept_length": 9}])
    batch = validate_batch(frame, GPUS, CATALOG)
    assert list(batch.accepted) == [0, 2]
    assert [(e.row, e.field) for e in batch.errors] == [(1, "expert_parallel"), (3, "spec_accept_length")]
    out = predictor().predict(frame)
    assert out["error"].iloc[[0, 2]].isna().all() and np.isfinite(out["itl_s"].iloc[[0, 2]]).all()
    assert "expert_parallel" in out["error"].iloc[1] and "spec_accept_length" in out["error"].iloc[3]


def test_the_http_body_takes_the_shape_fields():
    fields_ = request_fields()
    assert fields_["expert_parallel"]["range"] == [1, 64] and fields_["dp_attention"]["type"] == "boolean"
    assert fields_["speculative"]["allowed"] == ["none", "mtp", "eagle", "ngram"]
    assert "spec_accept_length" in fields_ and "spec_draft_tokens" in fields_
    body = as_requests([{**BASE, "dp_attention": True, "expert_parallel": 8, "speculative": "eagle",
                         "spec_draft_tokens": 4, "spec_accept_length": 3.2}, {**BASE, "dp_attention": "perhaps"}])
    out = predictor().predict(body)
    assert out["error"].iloc[0] is None and np.isfinite(out["itl_s"].iloc[0])
    assert "dp_attention" in out["error"].iloc[1]
