"""Planner logic on hand-written FIXTURE frames (made-up GPUs and figures, never measurements)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tests.code.test_step_physics import spec as real_config
from wattgpu import physics
from wattgpu.errors import WattgpuError
from wattgpu.planning import planner
from wattgpu.planning.planner import (
    Constraints,
    Costs,
    LlmSize,
    MemoryRule,
    costs_per_million_tokens,
    level_fraction,
    memory_fit,
    near_target,
    recommend,
)

# FIXTURE: four made-up GPUs; an 8 B-parameter LLM needs 16 GB of FP16 weights.
GPUS = pd.DataFrame({"gpu": ["big", "mid", "small", "tiny"], "memory_gb": [80.0, 24.0, 24.0, 16.0]})
LLM = LlmSize(total_params_b=8.0, kv_bytes_per_token=131072.0)  # 128 KiB per token (Llama-3-8B-like GQA)
PRED = pd.DataFrame({  # FIXTURE predictions for the GPUs that fit
    "gpu": ["big", "mid", "small"],
    "power_w": [300.0, 150.0, 70.0],
    "itl_ms": [6.0, 20.0, 60.0],
    "tokens_per_s": [166.7, 50.0, 16.7],
    "system_tokens_per_s": [73.0, 75.0, 73.7],
    "energy_per_token_j": [4.1, 2.0, 0.95],
})
FIT = memory_fit(GPUS, LLM, 1000, 1)


def with_intervals(pred: pd.DataFrame, rel: float = 0.1, **override: list) -> pd.DataFrame:
    """FIXTURE bounds: every target +-`rel` (energy: power and throughput bounds combined), then `override`s."""
    out = pred.copy()
    for t in ("power_w", "itl_ms", "system_tokens_per_s"):
        out[f"{t}_lo"], out[f"{t}_hi"] = out[t] * (1 - rel), out[t] * (1 + rel)
    out["energy_per_token_j_lo"] = out["energy_per_token_j"] * (1 - rel) / (1 + rel)
    out["energy_per_token_j_hi"] = out["energy_per_token_j"] * (1 + rel) / (1 - rel)
    out["interval"] = ""
    for k, v in override.items():
        out[k] = v
    return out


def test_memory_rule_weights_plus_one_request_kv_within_90_percent():
    fit = memory_fit(GPUS, LLM, tokens_per_request=1000, n_gpus=1).set_index("gpu")
    assert fit.loc["tiny", "usable_gb"] == pytest.approx(14.4)
    assert fit.loc["mid", "need_gb"] == pytest.approx(16.0 + 131072 * 1000 / 1e9)
    assert list(fit["fits"]) == [True, True, True, False]
    assert "14.4 GB usable" in fit.loc["tiny", "reason"] and fit.loc["big", "reason"] == ""


def test_more_gpus_per_replica_pool_their_memory():
    fit = memory_fit(GPUS, LLM, tokens_per_request=1000, n_gpus=2).set_index("gpu")
    assert fit.loc["tiny", "fits"] and fit.loc["tiny", "usable_gb"] == pytest.approx(28.8)


def test_a_stricter_rule_excludes_more():
    fit = memory_fit(GPUS, LLM, 1000, 1, MemoryRule(usable_fraction=0.6)).set_index("gpu")
    assert not fit.loc["mid", "fits"] and fit.loc["big", "fits"]


def test_least_energy_gpu_meeting_the_target_is_picked_and_others_excluded_with_reasons():
    rec = recommend(PRED, FIT, Constraints(max_itl_ms=25))
    t = rec.table.set_index("gpu")
    assert rec.pick == "mid"  # "small" uses less energy but misses 25 ms
    assert list(rec.table["gpu"]) == ["mid", "big", "small", "tiny"]
    assert t.loc["mid", "status"] == planner.STATUS_PICK and t.loc["mid", "rank"] == 1
    assert t.loc["big", "status"] == planner.STATUS_OK and t.loc["big", "rank"] == 2
    assert t.loc["small", "status"] == planner.STATUS_SLOW and "60.0 ms > 25 ms" in t.loc["small", "reason"]
    assert t.loc["tiny", "status"] == planner.STATUS_NO_FIT and pd.isna(t.loc["tiny", "rank"])
    assert pd.isna(t.loc["tiny", "power_w"])
    assert rec.summary.startswith("Pick: mid") and "big" in rec.summary


def test_a_looser_target_picks_the_frugal_gpu():
    rec = recommend(PRED, FIT, Constraints(max_itl_ms=100))
    assert rec.pick == "small"
    assert list(rec.table["rank"].dropna()) == [1, 2, 3]


def test_no_gpu_meets_the_target():
    rec = recommend(PRED, FIT, Constraints(max_itl_ms=1))
    assert rec.pick is None and "fastest is big" in rec.summary
    assert set(rec.table["status"]) == {planner.STATUS_SLOW, planner.STATUS_NO_FIT}


def test_nothing_fits():
    fit = memory_fit(GPUS.iloc[[3]], LlmSize(70.0, 0.0), 1000, 1)
    rec = recommend(PRED.iloc[:0], fit, Constraints(25))
    assert rec.pick is None and "hold the model" in rec.summary


def test_near_target_flags_close_calls():
    rec = recommend(PRED, FIT, Constraints(max_itl_ms=21))
    assert near_target(rec.table, 21, 0.10) == ["mid"]


@pytest.mark.parametrize("bad", [
    PRED.drop(columns="energy_per_token_j"),
    pd.concat([PRED, PRED.iloc[[0]]]),
    PRED.iloc[1:],  # "big" fits but has no prediction
])
def test_malformed_predictions_are_refused(bad):
    with pytest.raises((KeyError, ValueError)):
        recommend(bad, FIT, Constraints(25))


def test_target_must_be_positive():
    with pytest.raises(ValueError, match="--max-itl-ms must be positive"):
        recommend(PRED, FIT, Constraints(0))


# ------------------------------------------------------------------------------------------------ intervals


def test_the_upper_itl_bound_decides_and_point_only_gpus_are_reported():
    # mid: point 20 ms meets 21 ms, but its upper bound 22 ms does not
    rec = recommend(with_intervals(PRED), FIT, Constraints(max_itl_ms=21, confidence=0.8))
    t = rec.table.set_index("gpu")
    assert rec.pick == "big" and t.loc["mid", "status"] == planner.STATUS_POINT_ONLY
    assert pd.isna(t.loc["mid", "rank"]) and "80 % upper ITL bound 22.0 ms > 21 ms" in t.loc["mid", "reason"]
    assert t.loc["big", "itl_judged_ms"] == pytest.approx(6.6) and t.loc["big", "reason"] == ""
    assert rec.gpus(planner.STATUS_POINT_ONLY) == ["mid"] and "only at the point estimate" in rec.summary
    assert "mid" in rec.summary.split("point estimate")[-1]
    assert near_target(rec.table, 21, 0.10) == []  # its interval already decided


def test_a_tight_interval_lets_the_point_meeting_gpu_through():
    rec = recommend(with_intervals(PRED, rel=0.04), FIT, Constraints(max_itl_ms=21))
    assert rec.pick == "mid" and "upper bound 20.8 ms" in rec.summary


def test_nan_bounds_fall_back_to_the_point_estimate_and_say_so():
    pred = with_intervals(PRED, itl_ms_hi=[6.6, np.nan, 66.0], power_w_hi=[330.0, np.nan, 77.0],
                          interval=["", "abstain: too few calibration rows", ""])
    rec = recommend(pred, FIT, Constraints(max_itl_ms=21))
    t = rec.table.set_index("gpu")
    assert rec.pick == "mid" and t.loc["mid", "itl_judged_ms"] == 20.0
    assert "no 80 % ITL interval (abstain: too few calibration rows): judged on the point estimate" \
        in t.loc["mid", "reason"]
    assert "no interval: point estimate" in rec.summary
    assert near_target(rec.table, 21, 0.10) == ["mid"]  # judged on the point estimate, close to the target
    no_columns = recommend(PRED, FIT, Constraints(max_itl_ms=21))  # models from before intervals: no bound columns
    assert no_columns.pick == "mid" and "the models carry no calibration" in no_columns.table.loc[0, "reason"]


def test_a_power_budget_excludes_at_the_upper_power_bound():
    # big: 300 W point, 330 W upper bound
    rec = recommend(with_intervals(PRED), FIT, Constraints(max_itl_ms=25, max_power_w=320))
    t = rec.table.set_index("gpu")
    assert t.loc["big", "status"] == planner.STATUS_OVER_POWER and "330 W per GPU (80 % upper bound) > 320 W" \
        in t.loc["big", "reason"]
    assert rec.pick == "mid" and list(rec.table["rank"].dropna()) == [1]
    assert rec.gpus(planner.STATUS_OVER_POWER) == ["big"] and "Over the 320 W per GPU power budget: big" in rec.summary
    assert recommend(with_intervals(PRED), FIT, Constraints(max_itl_ms=25, max_power_w=340)).table.set_index(
        "gpu").loc["big", "status"] == planner.STATUS_OK


def test_a_replica_budget_counts_every_gpu_of_the_replica():
    fit = memory_fit(GPUS.iloc[:3], LLM, 1000, 2)
    c = Constraints(max_itl_ms=25, max_power_w=400, power_scope="replica", gpus_per_replica=2)
    t = recommend(with_intervals(PRED), fit, c).table.set_index("gpu")
    assert t.loc["mid", "power_judged_w"] == pytest.approx(2 * 165.0) and t.loc["mid", "status"] == planner.STATUS_PICK
    assert t.loc["big", "status"] == planner.STATUS_OVER_POWER and "per replica" in t.loc["big", "reason"]


# ------------------------------------------------------------------------------------------------ energy and costs


def test_energy_and_costs_per_million_tokens_with_conservative_bounds():
    pred = with_intervals(PRED.iloc[[1]])  # mid: 2 J per token, 75 tokens/s
    out = costs_per_million_tokens(pred, Costs(pue=1.5, price_per_kwh=0.2, gpu_price_per_hour=3.0), 2).iloc[0]
    kwh = 2.0 * 1e6 / 3.6e6 * 1.5
    assert out["energy_kwh_per_mtok"] == pytest.approx(kwh)
    assert out["energy_kwh_per_mtok_hi"] == pytest.approx(kwh * 1.1 / 0.9)
    assert out["energy_cost_per_mtok"] == pytest.approx(0.2 * kwh)
    hours = 1e6 / 75.0 / 3600
    assert out["gpu_cost_per_mtok"] == pytest.approx(2 * 3.0 * hours)
    assert out["gpu_cost_per_mtok_hi"] == pytest.approx(2 * 3.0 * 1e6 / (75.0 * 0.9) / 3600)  # slowest throughput
    assert out["total_cost_per_mtok"] == pytest.approx(0.2 * kwh + 2 * 3.0 * hours)
    assert out["total_cost_per_mtok_lo"] < out["total_cost_per_mtok"] < out["total_cost_per_mtok_hi"]
    no_price = costs_per_million_tokens(pred, Costs(), 1).iloc[0]
    assert math.isnan(no_price["energy_cost_per_mtok"]) and math.isnan(no_price["total_cost_per_mtok"])


def test_the_objective_changes_the_pick_when_prices_make_it_so():
    # FIXTURE: "frugal" uses the least energy but is slow, so it needs far more GPU-hours per million tokens
    pred = pd.DataFrame({"gpu": ["fast", "frugal"], "power_w": [700.0, 100.0], "itl_ms": [5.0, 20.0],
                         "tokens_per_s": [200.0, 50.0], "system_tokens_per_s": [1000.0, 200.0],
                         "energy_per_token_j": [0.7, 0.5]})
    fit = memory_fit(pd.DataFrame({"gpu": ["fast", "frugal"], "memory_gb": [80.0, 48.0]}), LLM, 1000, 1)
    c = Constraints(max_itl_ms=25)
    assert recommend(pred, fit, c).pick == "frugal"
    assert recommend(pred, fit, c, Costs(price_per_kwh=0.3, objective="energy-cost")).pick == "frugal"
    total = recommend(pred, fit, c, Costs(price_per_kwh=0.3, gpu_price_per_hour=2.0, objective="total-cost"))
    assert total.pick == "fast" and total.summary.startswith("Pick: fast") and "total cost" in total.summary
    t = total.table.set_index("gpu")
    assert t.loc["fast", "total_cost_per_mtok"] < t.loc["frugal", "total_cost_per_mtok"]
    # a GPU's own hourly price (catalog) beats the flat one
    own = recommend(pred.assign(gpu_price_per_hour=[20.0, np.nan]), fit, c,
                    Costs(price_per_kwh=0.3, gpu_price_per_hour=2.0, objective="total-cost"))
    assert own.pick == "frugal"


@pytest.mark.parametrize("make, flag", [
    (lambda: Costs(pue=0.9), "--pue"),
    (lambda: Costs(price_per_kwh=-0.1), "--price-per-kwh"),
    (lambda: Costs(gpu_price_per_hour=-1.0), "--gpu-price-per-hour"),
    (lambda: Costs(objective="energy-cost"), "--price-per-kwh"),
    (lambda: Costs(objective="carbon"), "--objective"),
    (lambda: Constraints(25, confidence=0.3), "--confidence"),
    (lambda: Constraints(25, confidence=0.995), "--confidence"),
    (lambda: Constraints(25, max_power_w=-5), "--max-power-w"),
    (lambda: Constraints(25, power_scope="node"), "--power-budget-scope"),
    (lambda: level_fraction(120, "--level"), "--level"),
    (lambda: recommend(PRED, FIT, Constraints(25), Costs(price_per_kwh=0.2, objective="total-cost")),
     "--gpu-price-per-hour"),
])
def test_bad_options_name_their_flag(make, flag):
    with pytest.raises(WattgpuError, match=flag):
        make()


def test_levels_as_percent_or_fraction():
    assert level_fraction(80, "--level") == level_fraction(0.8, "--level") == 0.8
    assert level_fraction(99, "--confidence") == 0.99 and level_fraction(50, "--confidence") == 0.5


# ------------------------------------------------------------------------------ the memory rule on real config.json
def test_a_sliding_window_layer_holds_only_its_window_in_the_memory_rule():
    """gpt-oss-120b (its config.json): 36 layers alternating full and 128-token sliding attention, 8 KV heads x 64
    dims, bf16 KV. One 32,000-token request caches 18 full layers x 32,000 tokens + 18 sliding layers x 128 tokens,
    each 2 x 8 x 64 values of 2 bytes, not 36 layers x 32,000 tokens."""
    from wattgpu import workload
    from wattgpu.planning import service

    spec = real_config("openai/gpt-oss-120b")
    wf = workload.filled({"precision": "mxfp4", "prompt_tokens": 30_000, "output_tokens": 2_000})
    per_token = 2 * 8 * 64 * 2
    by_hand = (18 * 32_000 + 18 * 128) * per_token
    size = service.llm_size(spec, wf)
    assert size.kv_bytes_per_request == pytest.approx(by_hand)
    fit = memory_fit(pd.DataFrame({"gpu": ["H100"], "memory_gb": [80.0]}), size, 32_000, 1,
                     service.memory_rule(wf, spec)).iloc[0]
    weights = physics.weights_gb(spec.total_params_b, workload.PRECISION_BYTES["mxfp4"])
    assert fit["need_gb"] == pytest.approx(weights + by_hand / 1e9)


def test_dp_attention_holds_the_attention_weights_again_on_every_further_gpu():
    """Llama-3.1-70B (its config.json): 80 layers, hidden 8,192, 64 heads and 8 KV heads of 128 dims; Q and O are
    8,192 x 8,192, K and V 8,192 x 1,024, so attention is 80 x 8,192 x (2 x 8,192 + 2 x 1,024) = 12.08 B weights. On
    8 GPUs at FP8 under DP attention each of the 7 further GPUs holds them again: 7 x 12.08 GB more than without."""
    from wattgpu import workload
    from wattgpu.planning import service

    spec = real_config("meta-llama/Meta-Llama-3.1-70B-Instruct")
    by_hand = 80 * 8192 * (2 * 8192 + 2 * 1024) / 1e9
    # counted from the config by rule, and the estimate from the attention's shape: the same for plain GQA
    assert spec.attention_params_b == pytest.approx(by_hand, abs=1e-6)
    assert spec.dp_attention_params_b() == pytest.approx(by_hand, abs=1e-6)
    assert spec.model_copy(update={"attention_params_b": None}).dp_attention_params_b() == pytest.approx(by_hand)
    gpus = pd.DataFrame({"gpu": ["B200"], "memory_gb": [180.0]})
    fits = {}
    for dp in (False, True):
        wf = workload.filled({"precision": "fp8", "n_gpus": 8, "dp_attention": dp})
        size = service.llm_size(spec, wf)
        fits[dp] = memory_fit(gpus, size, 1000, 8, service.memory_rule(wf, spec)).iloc[0]
        held = service.memory_limit(180.0, 8, size, service.memory_rule(wf, spec))
        fits[dp]["held"] = held
    assert fits[True]["need_gb"] - fits[False]["need_gb"] == pytest.approx(7 * by_hand)
    per_request = spec.kv_cache_bytes_per_sequence(wf["prompt_tokens"] + wf["output_tokens"])
    held_again = 7 * spec.dp_attention_params_b() * 1e9 / per_request  # the counted weights (by_hand to 1,000 params)
    assert fits[False]["held"] - fits[True]["held"] == pytest.approx(held_again, rel=1e-9)


def test_dp_attention_holds_deepseek_v4_pros_counted_attention_again_so_fp4_experts_on_8_b200_fit():
    """DeepSeek-V4-Pro (its config.json): 61 layers of hidden 7,168 and 128 heads of 512 dims, a low-rank query
    (q_lora_rank 1,536), one shared K = V head and a grouped low-rank output (16 groups, o_lora_rank 1,024). Per layer:
    7,168 x 1,536 + 1,536 x 128 x 512 (query) + 7,168 x 512 (K = V) + 128 x 512 x 1,024 + 16 x 1,024 x 7,168 (output)
    = 299.9 M, 18.29 B over 61 layers before the compressors, indexers and hyper-connection weights (a few percent
    more). The estimate from the attention's shape (heads x head dim square projections) says 57.3 B. Under DP attention
    each of the 7 further GPUs of 8 x B200 holds it again at FP8: with the counted 19.5 B the weights (FP8, routed
    experts NVFP4) fit in 90 % of 8 x 180 GB, with the estimate they would not."""
    from wattgpu import workload
    from wattgpu.planning import service

    spec = real_config("deepseek-ai/DeepSeek-V4-Pro")
    core = 61 * (7168 * 1536 + 1536 * 128 * 512 + 7168 * 512 + 128 * 512 * 1024 + 16 * 1024 * 7168) / 1e9
    assert core == pytest.approx(18.2935, abs=1e-4)
    assert core < spec.attention_params_b < 1.08 * core
    shape_estimate = spec.model_copy(update={"attention_params_b": None}).dp_attention_params_b()
    assert shape_estimate == pytest.approx(61 * 7168 * (2 * 128 * 512 + spec.kv_values_per_layer) / 1e9)  # 57.3 B
    wf = workload.filled({"precision": "fp8", "expert_precision": "nvfp4", "n_gpus": 8, "dp_attention": True,
                          "prompt_tokens": 2000, "output_tokens": 1000})
    rule = service.memory_rule(wf, spec)
    size = service.llm_size(spec, wf)
    assert size.replicated_gb == pytest.approx(spec.attention_params_b)  # FP8: a byte per weight
    fit = memory_fit(pd.DataFrame({"gpu": ["B200"], "memory_gb": [180.0]}), size, 3000, 8, rule).iloc[0]
    weights = physics.weights_gb(spec.total_params_b, rule.bytes_per_param)
    assert fit["need_gb"] == pytest.approx(weights + 7 * spec.attention_params_b + size.kv_bytes_per_request / 1e9)
    assert fit["fits"] and fit["usable_gb"] == pytest.approx(0.9 * 8 * 180)
    assert weights + 7 * shape_estimate > fit["usable_gb"]  # the estimate alone would have refused it
    # what predict, recommend and the page say: the rule names the weights held again
    answer = {dp: service.memory_fits(["B200"], [180.0], spec, {**wf, "dp_attention": dp}).iloc[0]
              for dp in (True, False)}
    assert answer[True]["fits"] and answer[True]["need_gb"] == pytest.approx(fit["need_gb"])
    said = "+ the attention's 19.5 GB again on each of 7 more GPUs (DP attention) + the KV cache"
    assert said in answer[True]["rule"]
    assert "again" not in answer[False]["rule"]


def test_the_code_digest_is_kept_on_disk_only_while_no_module_file_changes(tmp_path, monkeypatch):
    """One `wattgpu predict` reads the prediction code's digest from the cache folder instead of parsing ~30 modules;
    a module file whose size or modification time changed gives a new stamp, so the digest is computed again."""
    import os
    from pathlib import Path

    from wattgpu import codehash
    from wattgpu.planning import cache

    monkeypatch.setenv("WATTGPU_CACHE", str(tmp_path))
    cache._code_digest.cache_clear()
    first = cache._code_digest()
    assert first == codehash.digest(cache.PREDICTION_CODE)
    [memo] = tmp_path.glob("code-*.txt")
    memo.write_text("0" * 64)  # what a new process finds under the same stamp is what it uses
    cache._code_digest.cache_clear()
    assert cache._code_digest() == "0" * 64
    module = Path(cache.__file__)
    st = module.stat()
    try:
        os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        cache._code_digest.cache_clear()
        assert cache._code_digest() == first
    finally:
        os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns))
        cache._code_digest.cache_clear()


def test_the_prediction_cache_answers_a_hit_from_its_own_rows_without_the_models(tmp_path, monkeypatch):
    """A cached request is answered from its row of the SQLite file (not the whole cache, and no model is loaded);
    only the newest CACHE_MAX_ENTRIES are kept; the JSON files of the layout before are removed."""
    from wattgpu.modeling import store
    from wattgpu.planning import cache

    monkeypatch.setenv("WATTGPU_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "models"  # FIXTURE: a model folder's files only feed the fingerprint here
    for t in store.TARGET_DIRS:
        (folder / t).mkdir(parents=True)
        (folder / t / "meta.json").write_text(f'{{"target": "{t}"}}')
    (tmp_path / "cache").mkdir()
    legacy = tmp_path / "cache" / "predictions-0123456789abcdef0123.json"
    legacy.write_text("{}")
    requests = [{"gpu": g, "llm": "x", "scenario": "offline"} for g in ("a", "b", "c")]
    keys = [cache._key(r) for r in requests]
    monkeypatch.setattr(cache, "CACHE_MAX_ENTRIES", 2)
    writer = cache.PredictionCache(folder)
    writer.entries = {k: {"power_w": float(i), "itl_ms": float("nan")} for i, k in enumerate(keys)}
    writer._save(keys)
    assert not legacy.exists()

    def no_models(*_):
        raise AssertionError("a cache hit loaded the models")

    monkeypatch.setattr(store, "load_predictor", no_models)
    reader = cache.PredictionCache(folder)
    [hit] = reader.predict([requests[2]], rows=None)
    assert hit["power_w"] == 2.0 and math.isnan(hit["itl_ms"])
    assert list(reader.entries) == [keys[2]]  # it read its own row only
    assert reader.missing(requests) == [requests[0]]  # the oldest of three went: two are kept
    assert cache.PredictionCache(folder, enabled=False).missing(requests) == requests


def test_old_prediction_files_and_code_memos_are_pruned_to_the_newest_few(tmp_path, monkeypatch):
    """Each retrained model set writes a new predictions file and each code change a new digest memo: writing one
    keeps the CACHE_MAX_FILES (CODE_MEMOS_KEPT) newest by modification time, the one just written among them, and
    leaves other files alone. FIXTURE files stand in for older model sets."""
    import os

    from wattgpu.modeling import store
    from wattgpu.planning import cache

    folder_cache = tmp_path / "cache"
    folder_cache.mkdir()
    monkeypatch.setenv("WATTGPU_CACHE", str(folder_cache))
    old = []
    for i in range(6):  # six older files of each kind, oldest first
        for name in (f"predictions-{i:020d}.sqlite", f"code-{i:020d}.txt"):
            f = folder_cache / name
            f.write_text("0" * 64)
            os.utime(f, ns=(10**18 + i * 10**9, 10**18 + i * 10**9))
            old.append(f)
    other = folder_cache / "notes.txt"
    other.write_text("kept")

    cache._code_digest.cache_clear()
    try:
        cache._code_digest()  # no memo under today's stamp: computed and written
    finally:
        cache._code_digest.cache_clear()
    memos = sorted(folder_cache.glob("code-*.txt"), key=lambda f: f.stat().st_mtime_ns)
    assert len(memos) == cache.CODE_MEMOS_KEPT
    assert memos[:-1] == [folder_cache / f"code-{i:020d}.txt" for i in range(7 - cache.CODE_MEMOS_KEPT, 6)]

    models = tmp_path / "models"  # FIXTURE: a model folder's files only feed the fingerprint here
    for t in store.TARGET_DIRS:
        (models / t).mkdir(parents=True)
        (models / t / "meta.json").write_text(f'{{"target": "{t}"}}')
    writer = cache.PredictionCache(models)
    key = cache._key({"gpu": "a", "llm": "x", "scenario": "offline"})
    writer.entries = {key: {"power_w": 1.0}}
    writer._save([key])
    kept = sorted(folder_cache.glob("predictions-*.sqlite"), key=lambda f: f.stat().st_mtime_ns)
    assert len(kept) == cache.CACHE_MAX_FILES and kept[-1] == writer.path
    assert kept[:-1] == [folder_cache / f"predictions-{i:020d}.sqlite" for i in range(7 - cache.CACHE_MAX_FILES, 6)]
    assert other.read_text() == "kept"


def test_a_question_key_changes_with_every_file_and_setting_that_shapes_the_answer(tmp_path, monkeypatch):
    """wattgpu.planning.answers: the same question, files and terminal give the same key; a model file or catalog
    rewritten, an option, a file option's content, the package's code, the terminal's width each give another, a
    file written beside the script does not; the memo keeps its newest ANSWERS_KEPT answers."""
    import os
    import sys

    from wattgpu.planning import answers

    root = tmp_path / "project"  # FIXTURE project: its files only feed the key here
    (root / "models" / "power").mkdir(parents=True)
    (root / "data" / "catalogs").mkdir(parents=True)
    (root / "dvc.yaml").write_text("stages: {}\n")
    meta, gpus, config = root / "models/power/meta.json", root / "data/catalogs/gpus.yaml", tmp_path / "config.json"
    for f in (meta, gpus, config):
        f.write_text("{}\n")
    monkeypatch.setenv("WATTGPU_ROOT", str(root))
    monkeypatch.setenv("WATTGPU_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("COLUMNS", raising=False)
    asked = {"gpu": "L4", "llm_config": config, "gpu_spec": None, "models": None, "concurrency": 8.0}

    def key(**change):
        return answers.question_key("predict", {**asked, **change})

    def later(f) -> None:
        st = f.stat()
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))

    keys = [key(), key()]
    assert keys[0] == keys[1]
    keys += [key(gpu="A30"), key(concurrency=9.0), key(models=tmp_path / "other")]
    later(meta)
    keys.append(key())
    later(gpus)
    keys.append(key())
    config.write_text('{"num_hidden_layers": 16}\n')
    keys.append(key())
    monkeypatch.setenv("COLUMNS", "160")
    keys.append(key())
    monkeypatch.setattr(answers, "package_stamp", lambda: [("wattgpu/cli/__init__.py", 1, 1)])
    keys.append(key())
    assert len(set(keys)) == len(keys) - 1, keys
    script = tmp_path / "bin"  # the script's folder (sys.path[0]): a file written beside it changes no key
    script.mkdir()
    monkeypatch.setattr(sys, "path", [str(script), *sys.path[1:]])
    beside = key()
    (script / "answer.txt").write_text("written by the user\n")
    os.utime(script, ns=(10**18, 10**18 + 10**9))
    assert key() == beside

    monkeypatch.setattr(answers, "ANSWERS_KEPT", 2)
    for i, k in enumerate(keys[2:5]):
        answers.remember(k, f"answer {i}\n")
    assert [answers.recall(k) for k in keys[2:5]] == [None, "answer 1\n", "answer 2\n"]
