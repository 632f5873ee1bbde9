"""Prometheus reads: a simulated week of a 128-GPU cluster at 30 s, from a real Prometheus.

    python -m benchmarks.prometheus_read [--repeat N] [--rebuild] [--no-write]
    python -m benchmarks.run prometheus_read [--repeat N]

The world (``python -m simulator``, see ``SIM_ARGS``: 16 nodes x 8 GPUs, 7 days, 30 s scrapes) and
its TSDB are built once and cached under ``benchmarks/out/``; the TSDB is served by a Prometheus
started with ``tests/services/prometheus/start-prom.sh`` on a free 127.0.0.1 port and stopped
with ``stop-prom.sh`` at the end (also on error, Ctrl-C or SIGTERM).

Four runs, each in its own process (peak RSS is that process's ``ru_maxrss`` from ``wait4``),
interleaved in this order and repeated ``--repeat`` times (best wall time counts):

- ``path``: the accounting read path of ``connectors/kubernetes`` over the week --
  :func:`~connectors.kubernetes.ksm.pod_gpu_allocations` and
  :func:`~connectors.kubernetes.ksm.node_gpu_capacity` (KSM),
  :func:`~connectors.kubernetes.dcgm.dcgm_samples` (raw ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` and
  ``DCGM_FI_DEV_GPU_UTIL``) and :func:`~connectors.kubernetes.kueue_metrics.read_kueue_metrics`
  through ``PrometheusHttpSource(PrometheusConfig(url=...))``: reads plus the readers'
  derivations. Every ``raw_samples`` call it makes (selector, window) is recorded.
- ``ours``: exactly those ``raw_samples`` calls replayed (the per-pod ``uid=~`` batches
  included): HTTP -> final Polars frames, nothing derived -- what the baseline does too.
  ``parse_matrix`` (HTTP body -> Polars frame), ``finish_raw`` and the HTTP requests are wrapped
  by timers in that process, so the parse-only rate excludes the server and the transfer.
- ``ours_6h``: the same replay with ``PrometheusConfig(chunk=6 h)`` (windows of at most 6 h,
  the former default) instead of the default (windows sized to ~2 M samples, at most 24 h):
  shows what the request count costs; not the default configuration, so not used for the
  targets.
- ``baseline``: prometheus-api-client ``custom_query_range`` at the 30 s step over the same week
  for the same selectors (the per-pod ``uid=~`` batch matchers removed: whole metrics), split so
  that no request asks for more than 11,000 points per series, then ``MetricRangeDataFrame`` per
  selector. Same transfer encoding as ours (identity: no gzip on either side).

Timed span: from building the client to holding every frame (imports excluded). The ratio is
baseline seconds / ours seconds for the same metrics over the same week, i.e. the ratio of rates
on the same sample basis (ours' raw-sample count); the baseline's point count is reported too.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks import results

NAME = "prometheus_read"
DESCRIPTION = "Prometheus → Polars raw reads (a week, 128 GPUs) against prometheus-api-client"
OUT = Path(__file__).with_name("out")
ROOT = Path(__file__).resolve().parents[1]
START_PROM = ROOT / "tests" / "services" / "prometheus" / "start-prom.sh"
STOP_PROM = ROOT / "tests" / "services" / "prometheus" / "stop-prom.sh"

#: The simulated world: hpc=2 (2 x 8 A100), k8s=8 (8 x 8 H100), shared=6 (6 x 8 A100) =
#: 16 nodes x 8 GPUs = 128 GPUs. (hpc=4,k8s=8,shared=4 gives 124: the simulator makes a third
#: of the HPC nodes 4-GPU H100 boxes.)
SIM_ARGS: tuple[str, ...] = ("--seed", "1", "--days", "7", "--start", "2026-01-05",
                             "--nodes", "hpc=2,k8s=8,shared=6", "--step", "30")
WEEK_START = datetime(2026, 1, 5)
WEEK_END = WEEK_START + timedelta(days=7)
STEP = timedelta(seconds=30)

#: Targets of the issue.
MIN_PARSED_PER_S = 1_000_000
MIN_BASELINE_RATIO = 3.0

KINDS = ("path", "ours", "ours_6h", "baseline")
#: The variant ``ours_6h``: the same replay with ``PrometheusConfig(chunk=6 h)`` (default 24 h).
VARIANT_CHUNK = timedelta(hours=6)
_UID_MATCHER = re.compile(r'uid=~"(?:[^"\\]|\\.)*"\s*,?\s*')


# --------------------------------------------------------------------------------------------
# the world and the server


def _tag() -> str:
    return "-".join(a.lstrip("-").replace("=", "").replace(",", "_") for a in SIM_ARGS)


def build_world(*, rebuild: bool = False) -> tuple[Path, dict]:
    """The simulated world folder (cached; rebuilt when ``SIM_ARGS`` change or on request)."""
    OUT.mkdir(parents=True, exist_ok=True)
    folder = OUT / f"prom-world-{_tag()}"
    om = folder / "prometheus" / "metrics.om.gz"
    meta_path = folder / "bench-meta.json"
    if not rebuild and om.is_file() and meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        if meta.get("sim_args") == list(SIM_ARGS):
            return folder, meta
    tmp = OUT / f"prom-world-{_tag()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    t = time.perf_counter()
    print(f"simulating {' '.join(SIM_ARGS)} (a few minutes) ...", flush=True)
    subprocess.run([sys.executable, "-m", "simulator", *SIM_ARGS, "--gzip-metrics",
                    "--quiet", "--out", str(tmp)], check=True)
    world = json.loads((tmp / "world.json").read_text())
    nodes = (tmp / "nodes.csv").read_text().splitlines()[1:]
    meta = {
        "sim_args": list(SIM_ARGS),
        "gpus": len(nodes),
        "nodes": len({line.split(",", 1)[0] for line in nodes}),
        "metric_samples": world.get("summary", {}).get("metrics_samples"),
        "om_gz_bytes": (tmp / "prometheus" / "metrics.om.gz").stat().st_size,
        "simulate_s": round(time.perf_counter() - t, 1),
    }
    (tmp / "bench-meta.json").write_text(json.dumps(meta, indent=1))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.replace(folder)
    print(f"simulated {folder} in {meta['simulate_s']:.0f} s: {meta['gpus']} GPUs, "
          f"{meta['metric_samples']:,} samples", flush=True)
    return folder, meta


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    data_dir: Path
    start_s: float

    @property
    def pid(self) -> int | None:
        try:
            return int((self.data_dir / "prometheus.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def cpu_seconds(self) -> float | None:
        """utime + stime of the server process so far."""
        pid = self.pid
        if pid is None:
            return None
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(world: Path) -> Server:
    """Backfill (cached by start-prom.sh's stamp) and start Prometheus on a free loopback port."""
    data_dir = OUT / f"prom-tsdb-{_tag()}"
    t = time.perf_counter()
    out = subprocess.run(["bash", str(START_PROM), str(world / "prometheus" / "metrics.om.gz"),
                          str(data_dir), str(_free_port())],
                         stdout=subprocess.PIPE, text=True, check=False)
    if out.returncode != 0:
        stop_server(data_dir)
        msg = f"expected start-prom.sh to succeed, found exit status {out.returncode}"
        raise RuntimeError(msg)
    url = out.stdout.strip().splitlines()[-1]
    return Server(url, data_dir, time.perf_counter() - t)


def stop_server(data_dir: Path) -> None:
    subprocess.run(["bash", str(STOP_PROM), str(data_dir)], check=False,
                   stdout=subprocess.DEVNULL)


# --------------------------------------------------------------------------------------------
# one measurement (child process)


def baseline_selector(selector: str) -> str:
    """`selector` without the per-pod ``uid=~"..."`` batch matcher (the whole metric)."""
    out = _UID_MATCHER.sub("", selector)
    out = re.sub(r",\s*}", "}", out)
    return out.replace("{}", "")


def _instrument() -> dict:
    """Wrap ``parse_matrix`` and ``finish_raw`` of the connector module with timers."""
    import connectors.kubernetes.prometheus as prom

    st = {"parse_s": 0.0, "parse_rows": 0, "bodies": 0, "body_bytes": 0, "finish_s": 0.0,
          "http_s": 0.0}
    parse_matrix, finish_raw = prom.parse_matrix, prom.finish_raw

    def timed_parse(body: bytes):
        t = time.perf_counter()
        frame = parse_matrix(body)
        st["parse_s"] += time.perf_counter() - t
        st["parse_rows"] += frame.height
        st["bodies"] += 1
        st["body_bytes"] += len(body)
        return frame

    def timed_finish(*args, **kwargs):
        t = time.perf_counter()
        frame = finish_raw(*args, **kwargs)
        st["finish_s"] += time.perf_counter() - t
        return frame

    prom.parse_matrix, prom.finish_raw = timed_parse, timed_finish
    return st


def _source(url: str, st: dict, chunk: timedelta | None = None):
    """``PrometheusHttpSource(PrometheusConfig(url=...))`` with its HTTP requests timed."""
    from connectors.kubernetes.metrics_source import PrometheusConfig
    from connectors.kubernetes.prometheus import PrometheusHttpSource

    extra = {"chunk": chunk} if chunk is not None else {}
    source = PrometheusHttpSource(PrometheusConfig(url=url, timeout_s=600, **extra))
    request = getattr(source, "_request", None)
    if callable(request):  # server + transfer time of every request, when there is such a hook

        def timed_request(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return request(*args, **kwargs)
            finally:
                st["http_s"] += time.perf_counter() - t0

        source._request = timed_request  # type: ignore[method-assign]
    return source


def _counts(calls: list[tuple[str, int]]) -> dict:
    groups: dict[str, list[int]] = {}
    for selector, rows in calls:
        g = groups.setdefault(baseline_selector(selector), [0, 0])
        g[0] += 1
        g[1] += rows
    return {
        "samples": sum(r for _, r in calls), "raw_calls": len(calls),
        "selectors": {k: {"calls": v[0], "samples": v[1]} for k, v in groups.items()},
        "dcgm_samples": sum(r for s, r in calls if s.startswith("DCGM_")),
        "ksm_samples": sum(r for s, r in calls if s.startswith("kube_")),
        "kueue_samples": sum(r for s, r in calls if s.startswith("kueue_")),
    }


def _path(url: str, start: datetime, end: datetime) -> dict:
    from connectors.kubernetes.dcgm import dcgm_samples
    from connectors.kubernetes.ksm import node_gpu_capacity, pod_gpu_allocations
    from connectors.kubernetes.kueue_metrics import read_kueue_metrics

    st = _instrument()
    calls: list[tuple[str, datetime, datetime, int, float]] = []

    class Recorder:
        """The MetricsSource handed to the readers: records, times and counts every raw read."""

        def __init__(self, source) -> None:
            self.source = source

        def raw_samples(self, selector: str, a: datetime, b: datetime):
            t = time.perf_counter()
            frame = self.source.raw_samples(selector, a, b)
            calls.append((selector, a, b, frame.height, time.perf_counter() - t))
            return frame

        def series(self, match: str, a: datetime, b: datetime):
            return self.source.series(match, a, b)

    t, c = time.perf_counter(), time.process_time()
    source = _source(url, st)
    rec = Recorder(source)
    notes: list[str] = []
    warnings: list[str] = []
    kept = [
        pod_gpu_allocations(rec, start, end, notes=notes),
        node_gpu_capacity(rec, start, end, notes=notes),
        dcgm_samples(rec, start, end, warnings),
        read_kueue_metrics(rec, start, end),
    ]
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    source.close()
    return {
        "wall": wall, "cpu": cpu, "read_s": sum(x[4] for x in calls),
        "pod_intervals": kept[0].height, "node_intervals": kept[1].height,
        "dcgm_rows": kept[2].height, "kueue_counter_rows": kept[3].counters.height,
        "plan": [[s, a.isoformat(), b.isoformat()] for s, a, b, _, _ in calls],
        **_counts([(s, n) for s, _, _, n, _ in calls]), **st,
    }


def _ours(url: str, plan: list[list[str]], chunk: timedelta | None = None) -> dict:
    st = _instrument()
    calls = [(s, datetime.fromisoformat(a), datetime.fromisoformat(b)) for s, a, b in plan]
    t, c = time.perf_counter(), time.process_time()
    source = _source(url, st, chunk)
    frames = [source.raw_samples(s, a, b) for s, a, b in calls]
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    source.close()
    return {"wall": wall, "cpu": cpu, "read_s": wall,
            **_counts([(s, f.height) for (s, _, _), f in zip(calls, frames, strict=True)]),
            **st}


def _baseline(url: str, start: datetime, end: datetime, selectors: list[str]) -> dict:
    from prometheus_api_client import MetricRangeDataFrame, PrometheusConnect

    from connectors.kubernetes.prometheus import range_chunks
    from connectors.times import epoch_ms

    step_ms = round(STEP / timedelta(milliseconds=1))
    chunks = range_chunks(epoch_ms(start), epoch_ms(end) - step_ms, step_ms)
    query_s = frame_s = 0.0
    points = rows = requests = 0
    t, c = time.perf_counter(), time.process_time()
    pc = PrometheusConnect(url=url, disable_ssl=True, timeout=600,
                           headers={"Accept-Encoding": "identity"})
    frames = []
    for selector in selectors:
        t0 = time.perf_counter()
        result = []
        for a, b in chunks:
            result.extend(pc.custom_query_range(selector, datetime.fromtimestamp(a / 1000, UTC),
                                                datetime.fromtimestamp(b / 1000, UTC),
                                                f"{step_ms // 1000}s"))
            requests += 1
        points += sum(len(s["values"]) for s in result)
        t1 = time.perf_counter()
        query_s += t1 - t0
        if result:
            frame = MetricRangeDataFrame(result)
            rows += len(frame)
            frames.append(frame)
        del result
        frame_s += time.perf_counter() - t1
    wall = time.perf_counter() - t
    return {"wall": wall, "cpu": time.process_time() - c, "points": points, "rows": rows,
            "requests": requests, "chunks": len(chunks), "query_s": query_s,
            "frame_s": frame_s}


def _child(kind: str, url: str, result: str, plan_file: str) -> None:
    plan = json.loads(Path(plan_file).read_text()) if kind != "path" else []
    if kind == "path":
        out = _path(url, WEEK_START, WEEK_END)
    elif kind == "ours":
        out = _ours(url, plan)
    elif kind == "ours_6h":
        out = _ours(url, plan, VARIANT_CHUNK)
    else:
        selectors = list(dict.fromkeys(baseline_selector(s) for s, _, _ in plan))
        out = _baseline(url, WEEK_START, WEEK_END, selectors)
    Path(result).write_text(json.dumps({"kind": kind, **out}))


@dataclass
class Measure:
    kind: str
    wall: float
    cpu: float
    peak_bytes: int
    load1: float
    server_cpu: float | None
    out: dict


def measure(kind: str, server: Server, plan: Path | None) -> Measure:
    """Run one path in a fresh process; peak RSS from ``wait4``. `plan`: the recorded calls."""
    with tempfile.TemporaryDirectory(dir=OUT, prefix=f"run-prom-{kind}-") as tmp:
        result = Path(tmp) / "result.json"
        load1 = os.getloadavg()[0]
        cpu0 = server.cpu_seconds()
        out, peak = results.run_child(
            "benchmarks.prometheus_read", [kind, server.url, str(result), str(plan or "-")],
            result, kind, cwd=ROOT)
        cpu1 = server.cpu_seconds()
    server_cpu = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
    return Measure(kind, out["wall"], out["cpu"], peak, load1, server_cpu, out)


# --------------------------------------------------------------------------------------------
# report


def _versions() -> str:
    from importlib.metadata import version

    import pandas as pd
    import polars as pl

    out = subprocess.run(["prometheus", "--version"], capture_output=True, text=True, check=False)
    prom = out.stdout.split("\n", 1)[0].removeprefix("prometheus, ")
    return (f"Python {platform.python_version()}, Polars {pl.__version__}, pandas "
            f"{pd.__version__}, prometheus-api-client {version('prometheus-api-client')}, "
            f"requests {version('requests')}; Prometheus {prom}")


def _runs(ms: list[Measure], key: str | None = None) -> str:
    return ", ".join(f"{m.wall if key is None else m.out[key]:.2f}" for m in ms)



def _rate(n: float, s: float) -> str:
    return f"{n / s / 1e6:.2f} M/s" if s > 0 else "n/a"


def report(runs: dict[str, list[Measure]], meta: dict, server: Server, load_before: str,
           load_after: str) -> tuple[str, bool]:
    best = {k: min(ms, key=lambda m: m.wall) for k, ms in runs.items()}
    peak = {k: max(m.peak_bytes for m in ms) for k, ms in runs.items()}
    o, b, pa, v = best["ours"], best["baseline"], best["path"], best["ours_6h"]
    samples = o.out["samples"]
    parse_best = min(runs["ours"], key=lambda m: m.out["parse_s"]).out
    parse_rate = parse_best["parse_rows"] / parse_best["parse_s"]
    ratio = b.wall / o.wall
    checks = [
        (f"≥ {MIN_PARSED_PER_S / 1e6:g} M samples/s parsed (parse only: HTTP body → Polars)",
         f"{parse_rate / 1e6:.2f} M/s", parse_rate >= MIN_PARSED_PER_S),
        (f"≥ {MIN_BASELINE_RATIO:g}× the baseline (baseline s / ours s, raw reads end to end)",
         f"{ratio:.2f}×", ratio >= MIN_BASELINE_RATIO),
    ]
    ok = all(c[2] for c in checks)
    n = len(runs["ours"])
    mem = results.memory_gib()
    sel = o.out["selectors"]
    per_selector = ", ".join(
        f"`{k}` {v['samples']:,}" + (f" ({v['calls']} reads)" if v["calls"] > 1 else "")
        for k, v in sel.items()
    )
    tsdb = server.data_dir / "tsdb"
    tsdb_bytes = sum(p.stat().st_size for p in tsdb.rglob("*") if p.is_file())

    def row(label: str, k: str, count: str, rate: str) -> str:
        m = best[k]
        cpu = f"{m.server_cpu:.1f}" if m.server_cpu is not None else "n/a"
        return (f"| {label} | {count} | {m.wall:.2f} | {_runs(runs[k])} | {rate} | {m.cpu:.1f} "
                f"| {cpu} | {results.mib(peak[k])} |")

    def part(label: str, key: str, count: str = "", rate: str = "") -> str:
        return (f"| … {label} | {count} | {o.out[key]:.2f} | {_runs(runs['ours'], key)} | "
                f"{rate} | | | |")

    lines = [
        "## prometheus_read — a week of a 128-GPU cluster at 30 s, from a real Prometheus",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M:%S %Z')} with `python -m benchmarks.prometheus_read "
        f"--repeat {n}`: **{'PASS' if ok else 'FAIL'}**.",
        "",
        f"- Machine: {results.cores()} cores ({results.cpu_model()}), {mem:.0f} GiB RAM; "
        f"{platform.system()} {platform.release()}." if mem else
        f"- Machine: {results.cores()} cores ({results.cpu_model()}).",
        f"- Versions: {_versions()}.",
        f"- Load average (1/5/15 min) before: {load_before}; after: {load_after}; 1-min load at "
        "the start of each measurement: " + ", ".join(
            f"{k} {min(m.load1 for m in ms):.2f}–{max(m.load1 for m in ms):.2f}"
            for k, ms in runs.items()) + " (other jobs shared the 2 cores).",
        f"- World: `python -m simulator {' '.join(SIM_ARGS)} --gzip-metrics` → {meta['nodes']} "
        f"nodes, **{meta['gpus']} GPUs**, {meta['metric_samples']:,} samples in the OpenMetrics "
        f"file ({meta['om_gz_bytes'] / 1e6:,.0f} MB gzip), backfilled by `start-prom.sh` into "
        f"a {tsdb_bytes / 1e6:,.0f} MB TSDB; week {WEEK_START:%Y-%m-%d} .. {WEEK_END:%Y-%m-%d} "
        "UTC. Cached in `benchmarks/out/`.",
        f"- Reads of the accounting path: {o.out['raw_calls']} `raw_samples` calls "
        f"({o.out['bodies']:,} HTTP requests of ≤ 24 h, sized to ~2 M samples each, "
        f"{o.out['body_bytes'] / 1e6:,.0f} MB of "
        f"JSON) returning **{samples:,} raw samples**: DCGM {o.out['dcgm_samples']:,}, KSM "
        f"{o.out['ksm_samples']:,}, Kueue {o.out['kueue_samples']:,}. Per selector: "
        f"{per_selector}.",
        f"- baseline: the same {len(sel)} selectors (per-pod `uid=~` batches dropped: whole "
        f"metrics), {b.out['chunks']} `custom_query_range` chunks each ({b.out['requests']} "
        f"requests), {b.out['points']:,} points, {b.out['rows']:,} pandas rows.",
        f"- Each path runs in its own process; the {len(runs)} are interleaved and repeated {n} "
        f"times. "
        f"Time: building the client to holding every frame (imports excluded), best of {n}. "
        f"Peak RSS: the process's `ru_maxrss` (`wait4`), highest of the {n} runs. Server CPU: "
        "the Prometheus process's utime+stime during the best run.",
        "",
        "| path | samples | best s | all runs (s) | samples/s | client CPU s | server CPU s "
        "| peak RSS |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
        row("**ours**: the path's raw reads (HTTP → final Polars frames)", "ours",
            f"{samples:,}", f"**{_rate(samples, o.wall)}**"),
        part("of which HTTP (server + transfer)", "http_s", f"{o.out['parse_rows']:,}",
             _rate(o.out["parse_rows"], o.out["http_s"])),
        part("of which **parse only** (`parse_matrix`: body → Polars)", "parse_s",
             f"{parse_best['parse_rows']:,}", f"**{parse_rate / 1e6:.2f} M/s**"),
        part("of which `finish_raw` (concat, de-duplicate, sort)", "finish_s"),
        row(f"ours with `PrometheusConfig(chunk={VARIANT_CHUNK.total_seconds() / 3600:g} h)` "
            f"({v.out['bodies']:,} requests)", "ours_6h", f"{v.out['samples']:,}",
            _rate(v.out["samples"], v.wall)),
        row("path: the same reads + the readers' derivations", "path", f"{pa.out['samples']:,}",
            _rate(pa.out["samples"], pa.wall)),
        row("baseline: `custom_query_range` + `MetricRangeDataFrame`", "baseline",
            f"{b.out['points']:,} points",
            f"{_rate(samples, b.wall)} ({_rate(b.out['points'], b.wall)} points)"),
        f"| … of which `custom_query_range` (HTTP + `response.json()`) | | "
        f"{b.out['query_s']:.2f} | {_runs(runs['baseline'], 'query_s')} | | | | |",
        f"| … of which `MetricRangeDataFrame` | | {b.out['frame_s']:.2f} | "
        f"{_runs(runs['baseline'], 'frame_s')} | | | | |",
        "",
        f"samples/s = ours' raw-sample count ({samples:,}) / seconds, for the baseline too (same "
        "metrics, same week); the parse-only row counts the rows `parse_matrix` produced (window "
        f"edges included, before de-duplication; best of the {n} parse totals). Ratio baseline / "
        f"ours: **{ratio:.2f}×**; on the points basis (ours samples/s vs baseline points/s) "
        f"{(samples / o.wall) / (b.out['points'] / b.wall):.2f}×; baseline / path (reads + "
        f"derivations, which the baseline does not do) {b.wall / pa.wall:.2f}×; baseline / ours "
        f"with {VARIANT_CHUNK.total_seconds() / 3600:g} h windows {b.wall / v.wall:.2f}× (not "
        f"the default configuration: not used for the target). Peak RSS ours / baseline: "
        f"{peak['ours'] / peak['baseline']:.2f}.",
        "",
        "| target | measured | result |",
        "|---|---:|---|",
        *(f"| {t} | {v} | {'PASS' if good else 'FAIL'} |" for t, v, good in checks),
    ]
    return "\n".join(lines) + "\n", ok


# --------------------------------------------------------------------------------------------
# main


def _on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    p = results.parser(NAME, DESCRIPTION)
    p.add_argument("--repeat", type=int, default=3, help="runs per path, best counts (default 3)")
    p.add_argument("--rebuild", action="store_true", help="re-simulate the world and its TSDB")
    p.add_argument("--only", choices=KINDS, action="append", help="run only these paths")
    args = p.parse_args(argv)
    world, meta = build_world(rebuild=args.rebuild)
    data_dir = OUT / f"prom-tsdb-{_tag()}"
    if args.rebuild:
        stop_server(data_dir)
        shutil.rmtree(data_dir / "tsdb", ignore_errors=True)
    kinds = tuple(args.only or KINDS)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        with tempfile.TemporaryDirectory(dir=OUT, prefix="run-prom-plan-") as tmp:
            server = start_server(world)
            print(f"prometheus at {server.url} (pid {server.pid}), backfill/start "
                  f"{server.start_s:.1f} s", flush=True)
            plan = Path(tmp) / "plan.json"
            load_before = results.load_average()
            runs: dict[str, list[Measure]] = {k: [] for k in kinds}
            if "path" not in kinds:  # the calls to replay / the baseline's selectors
                plan.write_text(json.dumps(measure("path", server, None).out["plan"]))
            for r in range(args.repeat):
                for kind in kinds:
                    m = measure(kind, server, plan)
                    runs[kind].append(m)
                    if kind == "path":
                        plan.write_text(json.dumps(m.out["plan"]))
                    print(f"[{r + 1}/{args.repeat}] {_progress(m)}", flush=True)
            text, ok = "", True
            if set(kinds) == set(KINDS):
                text, ok = report(runs, meta, server, load_before, results.load_average())
    finally:
        stop_server(data_dir)
        signal.signal(signal.SIGTERM, previous)
    if not text:
        return 0
    return results.publish(NAME, text, ok, write=not args.no_write)


def _progress(m: Measure) -> str:
    o = m.out
    if m.kind == "baseline":
        detail = (f"{o['points']:,} points; query {o['query_s']:.2f} s, "
                  f"frames {o['frame_s']:.2f} s")
    else:
        detail = (f"{o['samples']:,} samples, {_rate(o['samples'], m.wall)}; raw reads "
                  f"{o['read_s']:.2f} s, http {o['http_s']:.2f} s, parse {o['parse_s']:.2f} s "
                  f"{_rate(o['parse_rows'], o['parse_s'])}, finish {o['finish_s']:.2f} s")
    return (f"{m.kind:>8}: {m.wall:6.2f} s ({detail}; cpu {m.cpu:.1f} s, peak "
            f"{results.mib(m.peak_bytes)}, load {m.load1:.2f})")


if __name__ == "__main__":
    results.entry(main, _child, 4)
