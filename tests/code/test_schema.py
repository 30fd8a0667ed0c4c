"""Row checks and quarantine on hand-written fixture rows (not measurements)."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from wattgpu.errors import UnknownNameError
from wattgpu.sources.schema import RAW_COLUMNS, Checks, count_report, finalize


class FakeCatalog:
    """A two-entry catalog with the resolve/get interface of the real ones."""

    def __init__(self, entries):
        self.entries = entries

    def resolve(self, name):
        if name not in self.entries:
            raise UnknownNameError("thing", name, self.entries)
        return name

    def get(self, name):
        return self.entries[self.resolve(name)]


GPUS = FakeCatalog({"GPU-A": SimpleNamespace(tdp_w=300.0, memory_bandwidth_gb_s=1000.0, memory_gb=40.0)})
KV = lambda tokens, bytes_per_value=2: 100_000.0 * tokens  # noqa: E731 (FIXTURE: 100 kB of KV cache per token)
LLMS = FakeCatalog({"llm-a": SimpleNamespace(is_moe=False, active_params_b=1.0, total_params_b=1.0,
                                             kv_cache_bytes_per_sequence=KV),
                    "moe-b": SimpleNamespace(is_moe=True, active_params_b=1.0, total_params_b=4.0,
                                             kv_cache_bytes_per_sequence=KV)})


def fixture_row(**overrides):
    row = {
        "source": "fixture", "config_id": "c", "replicate_id": 0, "raw_gpu_name": "GPU-A", "raw_llm_name": "llm-a",
        "n_gpus": 1, "tensor_parallel": 1, "pipeline_parallel": 1, "precision": "bf16", "engine": "vllm",
        "engine_version": "", "workload": "w", "scenario": "server", "scenario_label": "server_low",
        "request_rate_per_s": 0.017, "concurrency": 0.3, "concurrency_setting": np.nan,
        "concurrency_derivation": "littles_law_rate_x_mean_e2e",
        "prompt_tokens_mean": 14.0, "output_tokens_mean": 200.0, "requests_served": 10.0,
        "measurement_duration_s": np.nan, "power_w_per_gpu": 120.0, "power_derivation": "nvml_gpu0_mean",
        "itl_s": 0.02, "itl_reported_s": 0.02, "itl_derivation": "server_e2e_per_token_incl_ttft",
        "itl_missing_reason": "", "throughput_tok_s": 100.0, "energy_per_token_j": 1.2,
    }
    row.update(overrides)
    return {c: row[c] for c in RAW_COLUMNS}


def frame(*rows):
    df = pd.DataFrame(rows)
    assert list(df.columns) == list(RAW_COLUMNS)
    return df


def test_each_bad_row_is_quarantined_with_its_reason():
    raw = frame(
        fixture_row(config_id="ok"),
        fixture_row(config_id="g", raw_gpu_name="GPU-Z"),
        fixture_row(config_id="l", raw_llm_name="llm-z"),
        fixture_row(config_id="t", output_tokens_mean=0.0),
        fixture_row(config_id="p", power_w_per_gpu=-5.0),
        fixture_row(config_id="hi", power_w_per_gpu=900.0),
        fixture_row(config_id="ok"),  # duplicate key
        fixture_row(config_id="none", power_w_per_gpu=np.nan, itl_s=np.nan),
        fixture_row(config_id="moe", raw_llm_name="moe-b"),
    )
    table, quarantine = finalize(raw, GPUS, LLMS)
    assert list(table["config_id"]) == ["moe", "ok"]
    assert table.set_index("config_id").loc["moe", "is_moe"]
    reasons = dict(zip(quarantine["config_id"], quarantine["reason"]))
    assert reasons == {
        "g": "unknown_gpu", "l": "unknown_llm", "t": "zero_tokens", "p": "nonpositive_power",
        "hi": "implausible_power", "ok": "duplicate_key", "none": "missing_targets",
    }
    report = count_report({"fixture": len(raw)}, table, quarantine)
    assert report["sources"]["fixture"]["accounted_for"]
    assert report["sources"]["fixture"]["quarantined_by_reason"]["duplicate_key"] == 1


def test_one_token_rows_keep_power_but_lose_itl_with_reason():
    raw = frame(fixture_row(output_tokens_mean=1.0, itl_s=0.5))
    table, quarantine = finalize(raw, GPUS, LLMS, Checks(min_tokens_for_itl=2))
    assert len(quarantine) == 0
    assert np.isnan(table.loc[0, "itl_s"]) and table.loc[0, "power_w_per_gpu"] == 120.0
    assert "time to first token" in table.loc[0, "itl_missing_reason"]


def test_missing_column_is_named():
    raw = frame(fixture_row()).drop(columns=["itl_s"])
    with pytest.raises(ValueError, match="itl_s"):
        finalize(raw, GPUS, LLMS)


def test_itl_below_the_weight_streaming_floor_is_blanked_not_dropped():
    # floor: 2 bytes x 1e9 params / 1000 GB/s = 2 ms; half of it = 1 ms
    raw = frame(fixture_row(config_id="fast", itl_s=0.0005), fixture_row(config_id="ok", itl_s=0.0015))
    table, quarantine = finalize(raw, GPUS, LLMS)
    assert len(quarantine) == 0
    itl = table.set_index("config_id")["itl_s"]
    assert np.isnan(itl["fast"]) and itl["ok"] == 0.0015
    assert "implausible" in table.set_index("config_id").loc["fast", "itl_missing_reason"]


def test_offline_concurrency_and_per_request_itl_are_derived_from_the_specs():
    """FIXTURE: 40 GB GPU, 1 B params (2 GB of weights), 100 kB of KV cache per token, 214-token requests: the KV
    cache holds (36 - 2) GB / 21.4 MB = 1,588 sequences, vLLM's cap is 256, 1,000 requests were submitted."""
    offline = dict(scenario="offline", scenario_label="offline", request_rate_per_s=np.nan, concurrency=np.nan,
                   concurrency_setting=1000.0, concurrency_derivation="", itl_s=np.nan, itl_reported_s=0.01)
    small = dict(offline, config_id="small", raw_llm_name="moe-b", concurrency_setting=40.0)  # 8 GB of weights
    raw = frame(fixture_row(config_id="off", **offline), fixture_row(**small),
                fixture_row(config_id="waves", scenario="static_batch", concurrency=2000.0, concurrency_setting=2000.0,
                            concurrency_derivation="static_batch", itl_s=0.5))
    table = finalize(raw, GPUS, LLMS)[0].set_index("config_id")
    assert table.at["off", "concurrency"] == 256 and table.at["small", "concurrency"] == 40
    assert table.at["off", "itl_s"] == pytest.approx(256 / 100.0)  # requests in flight / tokens per s
    assert table.at["off", "itl_derivation"] == "offline_concurrency_per_throughput"
    assert table.at["off", "concurrency_derivation"] == "vllm_default_max_num_seqs_capped"
    assert table.at["waves", "concurrency"] == 1588 and table.at["waves", "itl_s"] == pytest.approx(15.88)
    assert table.at["waves", "concurrency_derivation"] == "static_batch_capped_by_kv_cache"
