"""PrometheusHttpSource against a loopback fake: windows, edge de-duplication, errors, auth."""

from __future__ import annotations

import itertools
import json
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.errors import SourceError
from connectors.kubernetes.metrics_source import MetricsSource, PrometheusConfig
from connectors.kubernetes.prometheus import (
    MAX_POINTS_PER_SERIES,
    PrometheusHttpSource,
    range_chunks,
)
from connectors.kubernetes.promql_selectors import check_selector
from connectors.kubernetes.records import RAW_SAMPLE_BASE
from connectors.kubernetes.sample_frames import finish_raw, parse_matrix
from connectors.times import epoch_ms, windows
from tests.connectors.kubernetes.fakes import T0, FakePrometheus, at, grid

GPU = {"UUID": "GPU-1", "gpu": "0", "Hostname": "n1"}


def source(url: str, **kw) -> PrometheusHttpSource:
    kw.setdefault("retries", 2)
    kw.setdefault("backoff_s", 0.0)
    kw.setdefault("timeout_s", 5.0)
    return PrometheusHttpSource(PrometheusConfig(url, **kw))


def util_series(step: float = 30.0, last: float = 4 * 3600 - 30) -> list:
    return [("DCGM_FI_DEV_GPU_UTIL", GPU, [(t, 50.0) for t in grid(0, last, step)])]


# --------------------------------------------------------------------------- pure helpers


def test_windows_are_half_open_and_cover_the_period():
    w = windows(T0, T0 + timedelta(hours=13), timedelta(hours=6))
    assert w == [
        (T0, T0 + timedelta(hours=6)),
        (T0 + timedelta(hours=6), T0 + timedelta(hours=12)),
        (T0 + timedelta(hours=12), T0 + timedelta(hours=13)),
    ]
    assert windows(T0, T0, timedelta(hours=1)) == []


def test_aware_datetimes_are_converted_to_utc():
    aware = datetime(2025, 1, 6, 9, 0, tzinfo=UTC).astimezone()
    assert epoch_ms(aware) == epoch_ms(T0 + timedelta(hours=1))


def test_query_range_chunks_never_exceed_11000_points():
    step = 30_000
    start, end = 0, 7 * 86_400_000
    chunks = range_chunks(start, end, step)
    assert chunks[0][0] == start
    assert chunks[-1][1] == end
    for a, b in chunks:
        assert (b - a) // step + 1 <= MAX_POINTS_PER_SERIES
    for (_, b), (a2, _) in itertools.pairwise(chunks):
        assert a2 == b + step  # step grid continues, no point twice
    assert sum((b - a) // step + 1 for a, b in chunks) == (end - start) // step + 1


@pytest.mark.parametrize("bad", ["rate(x[5m])", "x[5m]", "sum(x)", "x{a=\"1\"}[1m]", ""])
def test_only_plain_vector_selectors_are_accepted(bad):
    with pytest.raises(ValueError, match="vector selector"):
        check_selector(bad)


def test_selectors_that_are_accepted():
    for ok in ["x", 'x{a="1",b=~"c.*"}', '{__name__=~"kueue_.*"}', "kube_pod_info "]:
        assert check_selector(ok) == ok.strip()


def test_parse_matrix_keeps_ms_nan_inf_and_union_of_labels():
    body = json.dumps({
        "status": "success",
        "data": {"resultType": "matrix", "result": [
            {"metric": {"__name__": "m", "a": "1"},
             "values": [[1736150400.123, "1"], [1736150401, "NaN"], [1736150402, "+Inf"]]},
            {"metric": {"__name__": "m", "b": "x"}, "values": [[1736150400, "2.5"]]},
        ]},
    }).encode()
    frame = parse_matrix(body)
    assert frame.columns == ["ts", "value", "__name__", "a", "b"]
    assert frame.schema["ts"] == pl.Datetime("us")
    assert frame["ts"][0] == datetime(2025, 1, 6, 8, 0, 0, 123000)
    values = frame["value"].to_list()
    assert values[0] == 1.0
    assert values[1] != values[1]
    assert values[2] == float("inf")
    assert frame["b"].to_list() == [None, None, None, "x"]


def test_parse_matrix_of_an_empty_result_is_the_base_schema():
    body = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'
    assert parse_matrix(body).schema == pl.Schema(RAW_SAMPLE_BASE)


def test_finish_raw_drops_duplicate_edge_samples_and_keeps_half_open_window():
    edge = datetime(2025, 1, 6, 14)
    a = pl.DataFrame({"ts": [edge - timedelta(seconds=30), edge], "value": [1.0, 2.0],
                      "__name__": ["m", "m"], "x": ["1", "1"]})
    b = pl.DataFrame({"ts": [edge, edge + timedelta(seconds=30), edge + timedelta(hours=1)],
                      "value": [2.0, 3.0, 4.0], "__name__": ["m"] * 3, "x": ["1"] * 3})
    out = finish_raw([a, b], T0, edge + timedelta(hours=1))
    assert out["ts"].to_list() == [edge - timedelta(seconds=30), edge,
                                   edge + timedelta(seconds=30)]


# --------------------------------------------------------------------------- HTTP source


def test_source_satisfies_the_protocol():
    assert isinstance(source("http://127.0.0.1:1"), MetricsSource)


@pytest.mark.parametrize("closed", [True, False], ids=["2.x-closed", "3.x-left-open"])
def test_raw_samples_over_windows_return_every_sample_once(closed):
    with FakePrometheus(series=util_series(), closed_ranges=closed) as fake:
        src = source(fake.url, chunk=timedelta(hours=1))
        frame = src.raw_samples("DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(hours=4))
    assert frame.height == 480  # 4 h at 30 s, samples exactly on every window edge
    assert frame["ts"].is_unique().all()
    assert frame["ts"].min() == T0
    assert frame["ts"].max() == T0 + timedelta(hours=4, seconds=-30)
    queries = [p for path, p, _ in fake.requests if path == "/api/v1/query"]
    assert len(queries) == 4
    # evaluated at each window end with a range of window + 1 ms
    assert queries[0]["query"] == "DCGM_FI_DEV_GPU_UTIL[3600001ms]"
    assert float(queries[0]["time"]) == at(3600)


def _ranges_ms(fake) -> list[int]:
    return [int(p["query"].split("[")[1].rstrip("ms]")) - 1
            for path, p, _ in fake.requests if path == "/api/v1/query"]


def test_windows_grow_to_the_sample_budget_after_a_probe_hour():
    # one series at 30 s = 120 samples/h; a budget of 240 samples -> 2 h windows after the probe
    with FakePrometheus(series=util_series(last=8 * 3600 - 30)) as fake:
        src = source(fake.url, chunk=timedelta(hours=24), samples_per_request=240)
        frame = src.raw_samples("DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(hours=7))
        assert _ranges_ms(fake) == [3_600_000, 7_200_000, 7_200_000, 7_200_000]
        fake.requests.clear()
        # the density is remembered per metric: the next read starts at 2 h windows
        src.raw_samples('DCGM_FI_DEV_GPU_UTIL{gpu="0"}', T0, T0 + timedelta(hours=4))
        assert _ranges_ms(fake) == [7_200_000, 7_200_000]
    assert frame.height == 7 * 120
    assert frame["ts"].is_unique().all()


def test_windows_shrink_on_dense_metrics_and_stay_within_chunk():
    with FakePrometheus(series=util_series(step=15.0)) as fake:  # 240 samples/h
        src = source(fake.url, chunk=timedelta(minutes=90), samples_per_request=60)
        frame = src.raw_samples("DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(hours=2))
        ranges = _ranges_ms(fake)
    assert ranges[0] == 3_600_000  # the probe
    assert set(ranges[1:-1]) == {900_000}  # 60 samples at 240/h = 15 min
    assert frame.height == 2 * 240
    with FakePrometheus(series=util_series()) as fake:
        src = source(fake.url, chunk=timedelta(minutes=90), samples_per_request=10**9)
        src.raw_samples("DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(hours=4))
        assert max(_ranges_ms(fake)) == 5_400_000  # never above chunk


def test_post_method():
    with FakePrometheus(series=util_series()) as fake:
        frame = source(fake.url, method="POST").raw_samples(
            "DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(hours=1))
    assert frame.height == 120
    assert fake.methods == ["POST"]


def test_uncompressed_responses_by_default():
    with FakePrometheus(series=util_series()) as fake:
        source(fake.url).raw_samples("DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(minutes=5))
        source(fake.url, compress=True).raw_samples(
            "DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(minutes=5))
    assert [h["Accept-Encoding"] for _, _, h in fake.requests] == ["identity", "gzip"]


def test_window_end_is_exclusive_and_start_inclusive():
    with FakePrometheus(series=util_series()) as fake:
        src = source(fake.url, chunk=timedelta(minutes=7))
        frame = src.raw_samples("DCGM_FI_DEV_GPU_UTIL", T0 + timedelta(minutes=1),
                                T0 + timedelta(minutes=2))
    assert frame["ts"].to_list() == [T0 + timedelta(minutes=1),
                                     T0 + timedelta(minutes=1, seconds=30)]


def test_absent_metric_is_an_empty_frame():
    with FakePrometheus(series=util_series()) as fake:
        frame = source(fake.url).raw_samples("nope", T0, T0 + timedelta(hours=1))
    assert frame.height == 0
    assert frame.columns == list(RAW_SAMPLE_BASE)


def test_series_endpoint():
    with FakePrometheus(series=util_series()) as fake:
        frame = source(fake.url).series("DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(hours=1))
    assert frame.to_dicts() == [{"__name__": "DCGM_FI_DEV_GPU_UTIL", **dict(sorted(GPU.items()))}]


def test_5xx_is_retried_then_succeeds():
    calls = {"n": 0}

    def flaky(path, params):
        calls["n"] += 1
        return (503, b'{"status":"error","error":"busy"}') if calls["n"] <= 2 else None

    with FakePrometheus(series=util_series(), script=flaky) as fake:
        frame = source(fake.url, retries=2).raw_samples(
            "DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(hours=1))
    assert frame.height == 120
    assert calls["n"] == 3


def test_persistent_5xx_raises_source_error_naming_url_and_query():
    with FakePrometheus(script=lambda p, q: (502, b"bad gateway")) as fake:
        src = source(fake.url, retries=2)
        with pytest.raises(SourceError) as err:
            src.raw_samples("DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(hours=1))
        assert len(fake.requests) == 3
    text = str(err.value)
    assert fake.url in text
    assert "DCGM_FI_DEV_GPU_UTIL[3600001ms]" in text
    assert "HTTP 502" in text
    assert "3 attempt" in text


def test_bad_query_is_not_retried():
    body = b'{"status":"error","errorType":"bad_data","error":"parse error"}'
    with FakePrometheus(script=lambda p, q: (400, body)) as fake:
        with pytest.raises(SourceError, match="HTTP 400: bad_data: parse error"):
            source(fake.url).raw_samples("x", T0, T0 + timedelta(hours=1))
        assert len(fake.requests) == 1


def test_too_many_samples_halves_the_window():
    def limit(path, params):
        if int(params["query"].split("[")[1].rstrip("ms]")) > 1_800_001:
            return 422, (b'{"status":"error","errorType":"execution","error":"query processing '
                         b'would load too many samples into memory in query execution"}')
        return None

    with FakePrometheus(series=util_series(), script=limit) as fake:
        frame = source(fake.url, chunk=timedelta(hours=2)).raw_samples(
            "DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(hours=2))
    assert frame.height == 240
    assert frame["ts"].is_unique().all()


def test_unreachable_server_raises_source_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    src = source(f"http://127.0.0.1:{port}", retries=1)
    with pytest.raises(SourceError, match=rf"127.0.0.1:{port}.*after 2 attempt.*Connection"):
        src.raw_samples("kube_pod_info", T0, T0 + timedelta(hours=1))


def test_credentials_in_the_url_are_not_shown_in_errors():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    src = source(f"http://bob:hunter2@127.0.0.1:{port}", retries=0)
    with pytest.raises(SourceError) as err:
        src.raw_samples("kube_pod_info", T0, T0 + timedelta(hours=1))
    assert "hunter2" not in str(err.value)
    assert f"http://127.0.0.1:{port}/api/v1/query" in str(err.value)


def test_slow_server_times_out_into_source_error():
    with FakePrometheus(series=util_series(), delay_s=0.6) as fake:
        src = source(fake.url, retries=1, timeout_s=0.2)
        with pytest.raises(SourceError, match="Timeout"):
            src.raw_samples("DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(hours=1))


def test_backoff_grows_exponentially():
    slept = []
    with FakePrometheus(script=lambda p, q: (503, b"{}")) as fake:
        src = PrometheusHttpSource(
            PrometheusConfig(fake.url, retries=3, backoff_s=0.5), sleep=slept.append)
        with pytest.raises(SourceError):
            src.raw_samples("x", T0, T0 + timedelta(hours=1))
    assert slept == [0.5, 1.0, 2.0]


def test_bearer_token_file_basic_auth_and_headers(tmp_path: Path):
    token = tmp_path / "token"
    token.write_text("s3cret\n", encoding="utf-8")
    token.chmod(0o600)  # a secret file (connectors/secrets.py)
    with FakePrometheus(series=util_series()) as fake:
        src = source(fake.url, bearer_token_file=token, headers={"X-Scope-OrgID": "tenant-a"})
        src.raw_samples("DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(minutes=5))
        token.write_text("rotated", encoding="utf-8")
        src.raw_samples("DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(minutes=5))
        basic = source(fake.url, basic_auth_user="alice", basic_auth_password="pw")
        basic.raw_samples("DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(minutes=5))
    headers = [h for _, _, h in fake.requests]
    assert headers[0]["Authorization"] == "Bearer s3cret"
    assert headers[0]["X-Scope-OrgID"] == "tenant-a"
    assert headers[1]["Authorization"] == "Bearer rotated"
    assert headers[2]["Authorization"].startswith("Basic ")


def test_ca_bundle_is_used_for_verification(tmp_path: Path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n", encoding="utf-8")
    src = source("https://prom.example:9090", ca_bundle=ca)
    assert src.client._session.verify == str(ca)  # the PrometheusConnect session


def test_config_validation():
    with pytest.raises(ValueError, match="http"):
        PrometheusConfig("prom:9090")
    with pytest.raises(ValueError, match="retries"):
        PrometheusConfig("http://x", retries=-1)


def test_missing_token_file_is_a_source_error(tmp_path: Path):
    with pytest.raises(SourceError, match="secret file"):
        source("http://127.0.0.1:1", bearer_token_file=tmp_path / "missing")
