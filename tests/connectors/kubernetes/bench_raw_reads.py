"""Throughput of the raw-sample read path vs prometheus-api-client + MetricRangeDataFrame.

Not a test (pytest does not collect it). Run from the project root:

    .venv/bin/python -m tests.connectors.kubernetes.bench_raw_reads            # fixture + synthetic
    .venv/bin/python -m tests.connectors.kubernetes.bench_raw_reads --gpus 128 --hours 24

It starts its own Prometheus (tests/services/prometheus/start-prom.sh, loopback, random port) on
(1) the committed small fixture and (2) a synthetic DCGM_FI_DEV_GPU_UTIL history (N GPUs, 30 s
scrapes, a new pod-labelled series every 2 h per GPU), and stops it afterwards. Needs pandas for
MetricRangeDataFrame (a dev dependency).
"""

from __future__ import annotations

import argparse
import gzip
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
from prometheus_api_client import PrometheusConnect

from connectors.kubernetes.metrics_source import PrometheusConfig
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.prometheus import PrometheusHttpSource, range_chunks
from connectors.kubernetes.sample_frames import gc_paused
from connectors.times import epoch_ms

ROOT = Path(__file__).resolve().parents[3]
START_SCRIPT = ROOT / "tests" / "services" / "prometheus" / "start-prom.sh"
STOP_SCRIPT = ROOT / "tests" / "services" / "prometheus" / "stop-prom.sh"
FIXTURE = ROOT / "tests" / "fixtures" / "openmetrics" / "small-cluster.om.gz"
METRIC = "DCGM_FI_DEV_GPU_UTIL"


def synthetic(path: Path, gpus: int, hours: int, start: datetime) -> int:
    """Write the synthetic DCGM history; returns the number of samples."""
    t0 = int(start.replace(tzinfo=UTC).timestamp())
    n = 0
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as fh:
        fh.write(f"# TYPE {METRIC} gauge\n")
        for g in range(gpus):
            node, idx = f"gpu-{g // 8:03d}", g % 8
            base = (f'gpu="{idx}",UUID="GPU-{g:08d}-0000-0000-0000-000000000000",'
                    f'device="nvidia{idx}",modelName="NVIDIA H100 80GB HBM3",Hostname="{node}",'
                    f'job="nvidia-dcgm-exporter",instance="10.0.{g // 8}.1:9400"')
            for block in range(0, hours, 2):
                pod = f'namespace="team-{g % 4}",pod="job-{g}-{block}",container="main"'
                lines = []
                for k in range(min(2, hours - block) * 120):
                    ts = t0 + block * 3600 + k * 30
                    lines.append(f"{METRIC}{{{base},{pod}}} {(g * 7 + k) % 101} {ts}\n")
                fh.writelines(lines)
                n += len(lines)
        fh.write("# EOF\n")
    return n


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(om: Path, data_dir: Path) -> str:
    out = subprocess.run(["bash", str(START_SCRIPT), str(om), str(data_dir), str(free_port())],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def stop(data_dir: Path) -> None:
    subprocess.run(["bash", str(STOP_SCRIPT), str(data_dir)], capture_output=True, check=False)


REPEAT = 3


def timed(label: str, samples_of: Callable[[], int]) -> tuple[str, float, int]:
    """Best of REPEAT runs (the server's caches are warmed by a first query in `bench`)."""
    best, n = float("inf"), 0
    for _ in range(REPEAT):
        t = time.perf_counter()
        n = samples_of()
        best = min(best, time.perf_counter() - t)
    return label, best, n


def api_client_range(url: str, begin: datetime, end: datetime) -> tuple[int, int]:
    """custom_query_range at the scrape step (chunked to <= 11,000 points) + MetricRangeDataFrame;
    returns (points, rows of the pandas frame)."""
    from prometheus_api_client import MetricRangeDataFrame  # needs pandas: imported late

    pc = PrometheusConnect(url=url, disable_ssl=True, timeout=300)
    result = []
    for a, b in range_chunks(epoch_ms(begin), epoch_ms(end) - 1, 30_000):
        result.extend(pc.custom_query_range(
            METRIC, datetime.fromtimestamp(a / 1000, UTC), datetime.fromtimestamp(b / 1000, UTC),
            "30s"))
    points = sum(len(s["values"]) for s in result)
    frame = MetricRangeDataFrame(result)
    return points, len(frame)


def bench(url: str, om: Path, begin: datetime, end: datetime) -> list[tuple[str, float, int]]:
    rows = []
    http = PrometheusHttpSource(PrometheusConfig(url, timeout_s=300))
    http.raw_samples(METRIC, begin, end)  # warm the server (chunks read from disk once)
    rows.append(timed("raw_samples (6 h windows -> polars)",
                      lambda: http.raw_samples(METRIC, begin, end).height))
    gz = PrometheusHttpSource(PrometheusConfig(url, timeout_s=300, compress=True))
    rows.append(timed("raw_samples (6 h windows, gzip responses)",
                      lambda: gz.raw_samples(METRIC, begin, end).height))
    one = PrometheusHttpSource(PrometheusConfig(url, timeout_s=300, chunk=end - begin))
    rows.append(timed("raw_samples (one window -> polars)",
                      lambda: one.raw_samples(METRIC, begin, end).height))
    pc = PrometheusConnect(url=url, disable_ssl=True, timeout=300)
    span = int((end - begin).total_seconds())

    def client_raw() -> int:
        with gc_paused():
            res = pc.custom_query(f"{METRIC}[{span}s]", params={"time": epoch_ms(end) / 1000})
        return sum(len(s["values"]) for s in res)

    rows.append(timed("api-client custom_query(metric[range]) (json, no frame)", client_raw))
    holder: dict[str, int] = {}

    def range_and_frame() -> int:
        points, frame_rows = api_client_range(url, begin, end)
        holder["rows"] = frame_rows
        return points

    rows.append(timed("api-client custom_query_range + MetricRangeDataFrame", range_and_frame))
    rows.append(timed("OpenMetricsFileSource (parse file + select)",
                      lambda: OpenMetricsFileSource(om).raw_samples(METRIC, begin, end).height))
    return rows


def report(title: str, rows: list[tuple[str, float, int]]) -> None:
    print(f"\n== {title}")
    for label, secs, n in rows:
        print(f"{label:<60} {secs:8.3f} s  {n:>10,} samples  {n / secs:>12,.0f} samples/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=128)
    ap.add_argument("--hours", type=int, default=24)
    args = ap.parse_args()
    pl.Config.set_tbl_rows(20)
    with tempfile.TemporaryDirectory(prefix="gpuledger-bench-") as tmp:
        tmpdir = Path(tmp)
        fixture_dir = tmpdir / "prom-fixture"
        try:
            url = start(FIXTURE, fixture_dir)
            begin = datetime(2025, 1, 6, 8)
            report("small fixture (4 h, 4 GPUs)", bench(url, FIXTURE, begin,
                                                         begin + timedelta(hours=4)))
        finally:
            stop(fixture_dir)
        begin = datetime(2025, 1, 6)
        om = tmpdir / "synthetic.om.gz"
        t = time.perf_counter()
        n = synthetic(om, args.gpus, args.hours, begin)
        print(f"\nsynthetic: {n:,} samples written in {time.perf_counter() - t:.1f} s")
        synth_dir = tmpdir / "prom-synthetic"
        try:
            t = time.perf_counter()
            url = start(om, synth_dir)
            print(f"backfill + start: {time.perf_counter() - t:.1f} s")
            report(f"synthetic ({args.gpus} GPUs x {args.hours} h at 30 s)",
                   bench(url, om, begin, begin + timedelta(hours=args.hours)))
        finally:
            stop(synth_dir)


if __name__ == "__main__":
    main()
