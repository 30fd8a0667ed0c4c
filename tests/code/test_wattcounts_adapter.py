"""The processed Watt Counts adapter on a hand-written 4-row FIXTURE file (not measurements)."""

import numpy as np
import pytest

from wattgpu.errors import RawDataError
from wattgpu.sources.wattcounts import FILE, read_wattcounts_processed

HEADER = (",model,gpu_type,lambda_qps,scenario,avg_prompt_tokens,avg_generation_tokens,num_requests,"
          "gpu_power_draw_watts,avg_e2e_latency_seconds,energy_efficiency_tokens_per_joule,throughput_tokens_per_second")
ROWS = [
    "0,org/m,GPU X,-1.0,offline,14,200,1000,150,40,20,4000",
    "1,org/m,GPU X,-1.0,offline,14,210,1000,152,41,21,4100",
    "2,org/m,GPU X,0.017,server_low,14,100,5,60,2.0,2,50",
    "5,org/m,GPU X,0.33,server_high,14,1,80,90,0.3,1,3",
]


def write(tmp_path, rows, header=HEADER):
    (tmp_path / FILE).write_text("\n".join([header, *rows]) + "\n")
    return tmp_path


def test_offline_and_server_itl_definitions(tmp_path):
    df = read_wattcounts_processed(write(tmp_path, ROWS))
    assert len(df) == 4
    off = df[df.scenario_label == "offline"]
    assert np.allclose(off["itl_reported_s"], [1 / 4000, 1 / 4100])  # the paper's: duration / tokens = 1 / throughput
    assert off["itl_s"].isna().all() and off["concurrency"].isna().all()  # per-request: derived at ingest
    assert set(off["itl_derivation"]) == {"offline_duration_per_token"} and set(off["concurrency_setting"]) == {1000}
    assert off["measurement_duration_s"].tolist() == [40, 41]
    assert list(off["replicate_id"]) == [0, 1]
    low = df[df.scenario_label == "server_low"].iloc[0]
    assert low["itl_s"] == pytest.approx(2.0 / 100) and low["itl_derivation"] == "server_e2e_per_token_incl_ttft"
    # Little's law: realised arrival rate (tokens per s / tokens per request) x mean e2e latency
    assert low["concurrency"] == pytest.approx(low["throughput_tok_s"] / 100 * 2.0)
    assert low["request_rate_per_s"] == 0.017 and low["scenario"] == "server"
    assert np.isnan(df[df.scenario_label == "offline"]["request_rate_per_s"]).all()
    assert df["energy_per_token_j"].iloc[0] == pytest.approx(1 / 20)


def test_non_numeric_cell_names_file_line_and_field(tmp_path):
    rows = list(ROWS)
    rows[2] = rows[2].replace(",60,", ",sixty,")
    with pytest.raises(RawDataError) as err:
        read_wattcounts_processed(write(tmp_path, rows))
    assert "line 4" in str(err.value) and "gpu_power_draw_watts" in str(err.value) and FILE in str(err.value)


def test_missing_column_and_unknown_scenario(tmp_path):
    with pytest.raises(RawDataError, match="throughput_tokens_per_second"):
        read_wattcounts_processed(write(tmp_path, [r.rsplit(",", 1)[0] for r in ROWS], HEADER.rsplit(",", 1)[0]))
    rows = [ROWS[0].replace("offline", "burst")]
    with pytest.raises(RawDataError, match="scenario"):
        read_wattcounts_processed(write(tmp_path, rows))
