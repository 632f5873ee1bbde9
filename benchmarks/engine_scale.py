"""Engine scale: a 10,000-GPU estate for 7 days at minute grain through both engines.

    python -m benchmarks.engine_scale [--gpus 10000] [--days 1 7] [--engines duckdb spark]
                                      [--master spark://127.0.0.1:7077] [--no-write]
    python -m benchmarks.run engine_scale [-- --gpus 1000]

Per (GPUs, days), the world of :mod:`benchmarks.engine_world` is generated as a Parquet lake
(cached under ``benchmarks/out/``; generator rows/s and bytes on disk recorded). Then each engine
runs in its own process on a fresh ledger holding the world's small tables (allocations, Slurm
runs, inventory, gpu_busy_daily, rate card):

- ``duckdb``: the minute samples are loaded from the lake into the ledger (timed apart: "load"),
  then ``models.build.build_gpu_usage_hourly(con, first, last)`` ("usage") and
  ``models.incidents.build_incidents(con, first, last)`` ("incidents"), DuckDB on 2 threads;
- ``spark``: the samples loaded the same way (ingest keeps them in the ledger), then the same
  two calls with
  ``engine=SparkEngine(session, scratch, sources={"gpu_utilization": <lake glob>})`` on a
  standalone Spark master and worker started here (``tests/services/spark/start-spark.sh``), so
  Spark reads the samples from the lake itself.

Measured: wall time per step, peak RSS of the Python process (``wait4``) and, for Spark, the
peak RSS (``VmHWM``) of the driver, executor, master and worker JVMs; rows/s = minute samples /
step seconds; the growth from 1 to 7 days (time ratio over row ratio); and whether both engines
wrote the same totals (allocated, measured and busy GPU-seconds of ``allocation_usage_hourly``,
``node_usage_hourly`` measured and busy, incidents per kind and their GPU-seconds).
The projection to 100,000 GPUs from these figures is docs/scale-out.md.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from benchmarks import engine_world, results

NAME = "engine_scale"
DESCRIPTION = "a 10,000-GPU estate at minute grain through the DuckDB and Spark engines"
OUT = Path(__file__).with_name("out")
THREADS = 2
MEMORY_LIMIT = "10GB"
TOLERANCE_SECONDS = 30  # the scrape interval: no k8s_pod_allocations rows to read it from
#: totals compared between engines: name -> SQL (one row)
TOTALS = {
    "allocated_gpu_s": "SELECT sum(allocated_gpu_seconds) FROM allocation_usage_hourly",
    "measured_gpu_s": "SELECT sum(measured_gpu_seconds) FROM allocation_usage_hourly",
    "busy_gpu_s": "SELECT sum(busy_gpu_seconds) FROM allocation_usage_hourly",
    "node_measured_gpu_s": "SELECT sum(measured_gpu_seconds) FROM node_usage_hourly",
    "node_busy_gpu_s": "SELECT sum(busy_gpu_seconds) FROM node_usage_hourly",
    "gpu_usage_hourly_rows": "SELECT count(*) FROM gpu_usage_hourly",
    "incident_gpu_s": "SELECT coalesce(sum(gpu_seconds), 0) FROM incidents",
}
#: totals that must agree to the last digit; the others within MATCH_REL
EXACT = ("allocated_gpu_s", "gpu_usage_hourly_rows")
MATCH_REL = 1e-9
#: time ratio / row ratio from 1 to 7 days allowed at the largest estate: near-linear
MAX_GROWTH = 1.5


def load_small_tables(con, root: Path) -> dict[str, int]:
    """The world's small tables into the ledger ``con`` (schema already there)."""
    counts = {}
    for table in engine_world.SMALL_TABLES:
        path = engine_world.table_file(root, table.name)
        con.execute(f"INSERT INTO {table.name} BY NAME SELECT * FROM read_parquet(?)",
                    [str(path)])
        counts[table.name] = con.execute(f"SELECT count(*) FROM {table.name}").fetchone()[0]
    return counts


def load_utilization(con, root: Path) -> int:
    """The lake's minute samples into the ledger's ``gpu_utilization`` (cluster from the path)."""
    con.execute(
        "INSERT INTO gpu_utilization BY NAME SELECT * EXCLUDE (day) FROM "
        "read_parquet(?, hive_partitioning = true, hive_types = {'cluster': VARCHAR, "
        "'day': DATE})", [engine_world.utilization_glob(root)])
    return con.execute("SELECT count(*) FROM gpu_utilization").fetchone()[0]


def totals(con) -> dict[str, float]:
    out = {name: float(con.execute(sql).fetchone()[0] or 0) for name, sql in TOTALS.items()}
    out.update({f"incidents_{kind}": n for kind, n in con.execute(
        "SELECT kind, count(*) FROM incidents GROUP BY kind ORDER BY kind").fetchall()})
    return out


def compare(a: dict[str, float], b: dict[str, float]) -> list[tuple[str, float, float, bool]]:
    """(total, a, b, agree) for every total either side has."""
    rows = []
    for name in sorted(a.keys() | b.keys()):
        x, y = a.get(name, 0.0), b.get(name, 0.0)
        if name in EXACT or name.startswith("incidents_"):
            same = x == y
        else:
            same = abs(x - y) <= MATCH_REL * max(abs(x), abs(y), 1.0)
        rows.append((name, x, y, same))
    return rows


def growth(small: dict, large: dict, step: str) -> float:
    """(time ratio) / (row ratio) of ``step`` from the smaller run to the larger: 1 = linear."""
    return (large[step] / small[step]) / (large["rows"] / small["rows"])


def _vm_hwm(pid: int) -> int | None:
    """Peak resident set of process ``pid`` in bytes (``VmHWM``), None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def jvm_peaks(pids: dict[str, int], app_id: str | None = None) -> dict[str, int]:
    """VmHWM of the named JVMs and of the executors of ``app_id`` (found by their command line)."""
    out = {name: hwm for name, pid in pids.items() if (hwm := _vm_hwm(pid)) is not None}
    if app_id:
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                cmd = (proc / "cmdline").read_bytes().split(b"\0")
                if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmd and \
                        app_id.encode() in cmd:
                    hwm = _vm_hwm(int(proc.name))
                    if hwm is not None:
                        out[f"executor {proc.name}"] = hwm
    return out


def _timed(fn, *args, **kwargs) -> tuple[object, float]:
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t


def _open_ledger(folder: Path, cfg: dict):
    import duckdb

    con = duckdb.connect(str(folder / "ledger.duckdb"))
    con.execute(f"SET threads = {THREADS}")
    con.execute(f"SET memory_limit = '{cfg['memory_limit']}'")
    con.execute(f"SET temp_directory = '{folder / 'duckdb-tmp'}'")
    return con


def _child(engine: str, root: str, work: str, config: str) -> None:
    """One step of a run in this fresh process: ``load`` makes the ledger (the world's small
    tables and its minute samples, as ingest leaves them); ``duckdb`` / ``spark`` build usage and
    incidents on it with that engine. Writes ``work``/result-<engine>.json."""
    from models.build import build_gpu_usage_hourly
    from models.incidents import build_incidents
    from models.runner import ensure_schema

    cfg = json.loads(config)
    lake, folder = Path(root), Path(work)
    meta = json.loads((lake / "world.json").read_text())
    first = date.fromisoformat(meta["spec"]["start"])
    last = first + timedelta(days=meta["spec"]["days"] - 1)
    con = _open_ledger(folder, cfg)
    out: dict[str, object] = {"engine": engine, "rows": meta["utilization_rows"]}
    progress = folder / f"progress-{engine}.json"
    if engine == "load":
        ensure_schema(con)
        load_small_tables(con, lake)
        rows, out["load"] = _timed(load_utilization, con, lake)
        con.close()
        out["ledger_bytes"] = (folder / "ledger.duckdb").stat().st_size
        if rows != meta["utilization_rows"]:
            msg = f"expected {meta['utilization_rows']:,} rows loaded, found {rows:,}"
            raise RuntimeError(msg)
        (folder / "result-load.json").write_text(json.dumps(out))
        return
    kwargs: dict[str, object] = {}
    session = None
    out["start"] = 0.0
    if engine == "spark":
        from models.engines.spark import SparkEngine
        from models.engines.spark_session import SparkSettings, open_spark

        settings = SparkSettings(master=cfg["master"], scratch=folder / "spark-scratch",
                                 driver_memory=cfg["driver_memory"],
                                 executor_memory=cfg["executor_memory"],
                                 shuffle_partitions=cfg["shuffle_partitions"])
        session, out["start"] = _timed(open_spark, settings)
        progress.write_text(json.dumps(out))
        kwargs["engine"] = SparkEngine(session, folder / "spark-scratch", sources={
            "gpu_utilization": engine_world.utilization_glob(lake)})
    cpu0 = time.process_time()
    out["usage_rows"], out["usage"] = _timed(build_gpu_usage_hourly, con, first, last, **kwargs)
    progress.write_text(json.dumps(out))
    built, out["incidents"] = _timed(build_incidents, con, first, last,
                                     tolerance_seconds=TOLERANCE_SECONDS, **kwargs)
    out["cpu"] = time.process_time() - cpu0
    out["by_kind"] = built.by_kind
    out["totals"] = totals(con)
    if session is not None:
        gateway = session.sparkContext._gateway  # the driver JVM's process
        pids = {"driver": gateway.proc.pid} if getattr(gateway, "proc", None) else {}
        out["jvm_peaks"] = jvm_peaks({**pids, **cfg.get("cluster_pids", {})},
                                     session.sparkContext.applicationId)
        session.stop()
    con.close()
    out["ledger_bytes_built"] = (folder / "ledger.duckdb").stat().st_size
    (folder / f"result-{engine}.json").write_text(json.dumps(out))


def world_for(gpus: int, days: int, seed: int) -> tuple[Path, dict]:
    spec = engine_world.WorldSpec(gpus, days, seed=seed)
    root = OUT / f"engine-world-{gpus}g-{days}d-s{seed}"
    OUT.mkdir(parents=True, exist_ok=True)
    print(f"world {gpus:,} GPUs x {days} d ...", flush=True)
    return root, engine_world.cached(spec, root, log=print)


def _run_capped(args: list[str], timeout: float | None) -> tuple[int, int, bool]:
    """Run the child in its own process group: (exit status, peak RSS bytes from ``wait4``,
    whether it was killed at ``timeout`` seconds). Killing takes the group (the child and the
    Spark driver JVM it started), nothing else."""
    proc = subprocess.Popen([sys.executable, "-m", f"benchmarks.{NAME}", "--child", *args],
                            start_new_session=True)
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout, kill) if timeout else None
    if timer:
        timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except BaseException:  # Ctrl-C, SIGTERM
        kill()
        proc.wait()
        raise
    finally:
        if timer:
            timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss * 1024, killed.is_set()


def measure(engine: str, root: Path, cfg: dict, timeout: float | None = None) -> dict:
    """One engine over the world at ``root``: the ledger loaded in one fresh process, then built
    by ``engine`` in another (so each has its own peak RSS); a run killed at ``timeout`` (for the
    two together) keeps the steps it finished and says ``timed_out``."""
    with tempfile.TemporaryDirectory(dir=OUT, prefix="engine-scale-") as tmp:
        load1 = os.getloadavg()[0]
        out: dict[str, object] = {"engine": engine}
        began = time.perf_counter()
        for step in ("load", engine):
            left = None if timeout is None else timeout - (time.perf_counter() - began)
            if left is not None and left <= 0:  # the budget went on the steps before
                out["timed_out"] = timeout
                break
            code, rss, killed = _run_capped([step, str(root), tmp, json.dumps(cfg)], left)
            result = Path(tmp) / f"result-{step}.json"
            progress = Path(tmp) / f"progress-{step}.json"
            if code == 0:
                done = json.loads(result.read_text())
            elif killed:
                done = {"timed_out": timeout,
                        **(json.loads(progress.read_text()) if progress.is_file() else {})}
            else:
                msg = (f"expected the {step} step of the {engine} run to succeed, found exit "
                       f"status {code}")
                raise RuntimeError(msg)
            done.pop("engine", None)
            out.update(done)
            out["load_rss" if step == "load" else "rss"] = rss
            if killed:
                break
        du = sum(p.stat().st_size for p in Path(tmp).rglob("*") if p.is_file())
    return {**out, "load1": load1, "work_bytes": du}


START_SPARK = Path(__file__).parents[1] / "tests" / "services" / "spark" / "start-spark.sh"
STOP_SPARK = START_SPARK.with_name("stop-spark.sh")


@contextlib.contextmanager
def spark_cluster(cfg: dict):
    """A standalone master + worker on 127.0.0.1 (tests/services/spark/start-spark.sh, the
    launcher the Spark tests use) for the Spark runs, stopped at the end; ``--master`` instead
    uses a running one."""
    if cfg.get("master"):
        yield cfg
        return
    from benchmarks.prometheus_read import _free_port

    data_dir = OUT / "engine-scale-spark"
    ports = [str(_free_port()) for _ in range(4)]
    env = {**os.environ, "SPARK_WORKER_CORES": str(THREADS),
           "SPARK_WORKER_MEMORY": cfg["worker_memory"]}
    out = subprocess.run(["bash", str(START_SPARK), str(data_dir), *ports], env=env,
                         stdout=subprocess.PIPE, text=True, check=False)
    try:
        if out.returncode != 0:
            msg = f"expected start-spark.sh to succeed, found exit status {out.returncode}"
            raise RuntimeError(msg)
        pids = {role: int((data_dir / f"{role}.pid").read_text()) for role in
                ("master", "worker")}
        yield {**cfg, "master": out.stdout.strip().splitlines()[-1], "cluster_pids": pids}
    finally:
        subprocess.run(["bash", str(STOP_SPARK), str(data_dir)], check=False,
                       stdout=subprocess.DEVNULL)


def main(argv: list[str]) -> int:
    p = results.parser(NAME, DESCRIPTION)
    p.add_argument("--gpus", type=int, nargs="+", default=[10_000])
    p.add_argument("--days", type=int, nargs="+", default=[1, 7])
    p.add_argument("--engines", nargs="+", default=["duckdb", "spark"],
                   choices=["duckdb", "spark"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--master", default="", help="a running Spark master (default: start one)")
    p.add_argument("--memory-limit", default=MEMORY_LIMIT, help="DuckDB memory_limit")
    p.add_argument("--driver-memory", default="2g")
    p.add_argument("--executor-memory", default="6g")
    p.add_argument("--worker-memory", default="7g")
    p.add_argument("--shuffle-partitions", type=int, default=16)
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds a run may take before it is stopped (recorded as such)")
    p.add_argument("--resume", type=Path, help="a benchmarks/out/engine-scale-*.json of an "
                   "earlier run: its measurements are kept, only the missing ones run")
    args = p.parse_args(argv)
    started = datetime.now(UTC)
    cfg = {"master": args.master, "memory_limit": args.memory_limit,
           "driver_memory": args.driver_memory, "executor_memory": args.executor_memory,
           "worker_memory": args.worker_memory, "shuffle_partitions": args.shuffle_partitions}
    worlds, runs = {}, []
    if args.resume:
        kept = json.loads(args.resume.read_text())
        worlds = {tuple(int(x) for x in k.split("x")): m for k, m in kept["worlds"].items()}
        runs = [{**r, "resumed": True} for r in kept["runs"]]
    for gpus in args.gpus:
        for days in sorted(args.days):
            root, worlds[(gpus, days)] = world_for(gpus, days, args.seed)
            for engine in args.engines:
                if any((r["gpus"], r["days"], r["engine"]) == (gpus, days, engine)
                       for r in runs):
                    continue  # measured in the run resumed
                print(f"{gpus:,} GPUs x {days} d, {engine} ...", flush=True)
                if engine == "spark":
                    with spark_cluster(cfg) as spark_cfg:
                        run = measure(engine, root, spark_cfg, args.timeout)
                else:
                    run = measure(engine, root, cfg, args.timeout)
                runs.append({"gpus": gpus, "days": days, **run})
                print(f"  {_steps(run)}, peak {results.mib(run['rss'])}", flush=True)
                _keep(started, worlds, runs)
    text, ok = report(worlds, runs, args, started)
    return results.publish(NAME, text, ok, write=not args.no_write)


PROJECT_GPUS = 100_000
PROJECT_CORES = (2, 16, 64)


def projection(world: dict, run: dict, exponent: float = 1.0,
               gpus: int = PROJECT_GPUS) -> dict[str, float]:
    """What ``gpus`` GPUs need per UTC day from ``run`` on its ``world``: rows and bytes scale
    with the GPUs; time as (row ratio) ** ``exponent`` (1: linear; the measured growth between
    two sizes otherwise) and inversely with cores (an assumption, docs/scale-out.md)."""
    spec = world["spec"]
    rows_day = world["utilization_rows"] / (spec["gpus"] * spec["days"]) * gpus
    bytes_row = world["utilization_bytes"] / world["utilization_rows"]
    ratio = rows_day / run["rows"]  # the run's rows -> one day of ``gpus``
    core_s_day = (run["usage"] + run["incidents"]) * ratio ** exponent * THREADS
    out = {"rows_day": rows_day, "bytes_day": rows_day * bytes_row,
           "bytes_year": rows_day * bytes_row * 365, "core_s_day": core_s_day,
           **{f"s_day_{n}": core_s_day / n for n in PROJECT_CORES}}
    if run.get("work_bytes"):
        out["ledger_bytes_day"] = run["work_bytes"] / run["rows"] * rows_day
    return out


def exponent(small: dict, large: dict) -> float:
    """log(time ratio) / log(row ratio) of usage + incidents: 1 = linear."""
    t = (large["usage"] + large["incidents"]) / (small["usage"] + small["incidents"])
    return math.log(t) / math.log(large["rows"] / small["rows"])


def _steps(run: dict) -> str:
    keys = ("load", "start", "usage", "incidents") if run["engine"] == "spark" else \
        ("load", "usage", "incidents")
    done = [f"{k} {run[k]:.1f} s" for k in keys if k in run]
    return ", ".join(done) or "nothing"


def _minutes(seconds: float) -> str:
    """A projected duration: whole minutes, or seconds under ten minutes."""
    return f"{seconds / 60:,.0f} min" if seconds >= 600 else f"{seconds:,.0f} s"


def _w(n: float) -> str:
    return f"{n:,.0f}"


def report(worlds: dict, runs: list[dict], args, started: datetime) -> tuple[str, bool]:
    import duckdb

    lines = [
        f"## {NAME} — {DESCRIPTION}", "",
        f"Run {started:%Y-%m-%d %H:%M:%S} UTC with `python -m benchmarks.run {NAME} -- --gpus "
        f"{' '.join(map(str, args.gpus))} --days {' '.join(map(str, args.days))} --engines "
        f"{' '.join(args.engines)}`"
        + (" added to the runs kept from an earlier run on this machine (`--resume`: "
           + ", ".join(f"{r['gpus']:,} GPUs x {r['days']} d {r['engine']}" for r in runs
                       if r.get("resumed")) + ")" if getattr(args, "resume", None) else "")
        + ": **{status}**.", "",
        f"- Machine: {results.cpu_model()}, {results.cores()} cores, "
        f"{results.memory_gib() or 0:.0f} GiB; DuckDB {duckdb.__version__}; load average at "
        f"the end {results.load_average()} (other jobs shared the cores).",
        "- World: `benchmarks/engine_world.py` (seed "
        f"{args.seed}): nodes of 8 A100, half Slurm and half Kubernetes, two 4-GPU lanes per "
        "node holding 3-6.6 h allocations in 7 h slots, busy 30-95 % with idle 20-min blocks, "
        "one allocation in 40 idle all along, one node-day in 40 missing 20 min of samples; "
        "written as ZSTD Parquet, one file per (cluster, day), streaming a day at a time.",
        f"- Each engine in its own process on a fresh ledger; DuckDB threads = {THREADS}, "
        f"memory_limit = {args.memory_limit}; Spark: a standalone master + worker on 127.0.0.1 "
        f"({THREADS} cores, worker {args.worker_memory}, executor {args.executor_memory}, "
        f"driver {args.driver_memory}, {args.shuffle_partitions} shuffle partitions) reading "
        "the samples from the lake. usage = `build_gpu_usage_hourly`, incidents = "
        "`build_incidents` (every detector), both over every day of the world; rows/s = minute "
        "samples / seconds; load = the world's small tables and minute samples into a fresh "
        "ledger, as ingest leaves them on either engine, in a process of its own; usage and "
        "incidents in a second process; usage is built a day per pass (models/build.py "
        "`USAGE_CHUNK_DAYS`), incidents in one pass over the days; peak RSS = each Python "
        "process's `ru_maxrss` (`wait4`), JVMs' `VmHWM` (master and worker: since they "
        "started).", "",
        "| GPUs | days | minute samples | on disk | bytes/row | generate s | generated rows/s |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (gpus, days), w in sorted(worlds.items()):
        lines.append(f"| {gpus:,} | {days} | {w['utilization_rows']:,} | "
                     f"{w['utilization_bytes'] / 1e6:,.0f} MB | "
                     f"{w['utilization_bytes'] / w['utilization_rows']:.2f} | "
                     f"{w['seconds']:.1f} | {w['rows_per_s']:,} |")
    lines += ["", "| GPUs | days | engine | load s | Spark start s | usage s | incidents s | "
              "usage rows/s | incidents rows/s | CPU s (Python) | peak RSS load | peak RSS build "
              "(Python) | peak RSS JVMs |",
              "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    stopped = [r for r in runs if "timed_out" in r]
    runs = [r for r in runs if "timed_out" not in r]
    for r in runs:
        jvms = ", ".join(f"{k} {results.mib(v)}" for k, v in sorted(
            r.get("jvm_peaks", {}).items())) or ""
        start = f"{r.get('start', 0.0):.1f}" if r["engine"] == "spark" else ""
        lines.append(
            f"| {r['gpus']:,} | {r['days']} | {r['engine']} | {r['load']:.1f} | "
            f"{start} | {r['usage']:.1f} | {r['incidents']:.1f} | "
            f"{_w(r['rows'] / r['usage'])} | "
            f"{_w(r['rows'] / r['incidents'])} | {r['cpu']:.1f} | {results.mib(r['load_rss'])} | "
            f"{results.mib(r['rss'])} | {jvms} |")
    lines += [""] if stopped else []
    for r in stopped:
        line = (f"- {r['gpus']:,} GPUs x {r['days']} d, {r['engine']}: stopped after "
                f"{r['timed_out']:,.0f} s, unfinished (finished: {_steps(r)}; peak RSS "
                f"{results.mib(r.get('rss', r['load_rss']))})")
        day = [d for d in runs if (d["gpus"], d["engine"], d["days"]) ==
               (r["gpus"], r["engine"], 1)]
        if day and "usage" in r:
            line += (f"; usage x{r['usage'] / day[0]['usage']:.2f} of the 1-day run's for "
                     f"x{r['rows'] / day[0]['rows']:.2f} the rows (growth "
                     f"{growth(day[0], r, 'usage'):.2f})")
        lines.append(line + ".")
    checks = []
    by = {(r["gpus"], r["days"], r["engine"]): r for r in runs}
    lines += ["", "Growth from the fewest to the most days (time ratio / row ratio; 1 = linear):",
              ""]
    for gpus in sorted({r["gpus"] for r in runs}):
        for engine in sorted({r["engine"] for r in runs}):
            have = sorted(d for (g, d, e) in by if g == gpus and e == engine)
            if len(have) > 1:
                a, b = by[(gpus, have[0], engine)], by[(gpus, have[-1], engine)]
                lines.append(
                    f"- {gpus:,} GPUs, {engine}, {have[0]} -> {have[-1]} days: rows x"
                    f"{b['rows'] / a['rows']:.2f}; load x{b['load'] / a['load']:.2f}, usage x"
                    f"{b['usage'] / a['usage']:.2f} (growth {growth(a, b, 'usage'):.2f}), "
                    f"incidents x{b['incidents'] / a['incidents']:.2f} (growth "
                    f"{growth(a, b, 'incidents'):.2f}); peak RSS x{b['rss'] / a['rss']:.2f}.")
                if gpus == max(r["gpus"] for r in runs):
                    for step in ("usage", "incidents"):
                        g = growth(a, b, step)
                        checks.append((
                            f"{engine} {step}: {have[0]} -> {have[-1]} days at {gpus:,} GPUs "
                            f"near-linear (growth <= {MAX_GROWTH})", f"{g:.2f}",
                            g <= MAX_GROWTH))
    for (gpus, days, engine), r in sorted(by.items()):
        if engine != "spark" or (gpus, days, "duckdb") not in by:
            continue
        rows = compare(by[(gpus, days, "duckdb")]["totals"], r["totals"])
        lines += ["", f"Totals, {gpus:,} GPUs x {days} d (DuckDB engine vs Spark engine):",
                  "", "| total | duckdb | spark | same |", "|---|---:|---:|---|"]
        lines += [f"| {n} | {x:,.6f} | {y:,.6f} | {'yes' if ok else 'NO'} |"
                  for n, x, y, ok in rows]
        checks.append((f"both engines give the same totals ({gpus:,} GPUs x {days} d)",
                       f"{sum(ok for *_, ok in rows)} of {len(rows)}", all(o for *_, o in rows)))
    lines += ["", f"Projection to {PROJECT_GPUS:,} GPUs (every assumption in "
              "docs/scale-out.md): one UTC day of usage + incidents, from each engine's 1-day "
              "runs; time scaled by the row ratio (linear) and by the row ratio to the power "
              "measured between the fewest and most GPUs (exponent); cores: time x 2 / N.", "",
              "| engine | from | exponent | rows a day | Parquet a day | a year | ledger a day "
              "| linear, 2 cores | exponent, 2 cores | exponent, 16 cores | exponent, 64 cores |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for engine in sorted({r["engine"] for r in runs}):
        daily = sorted((r for r in runs if r["engine"] == engine and r["days"] == 1),
                       key=lambda r: r["rows"])
        if not daily:
            continue
        big = daily[-1]
        e = exponent(daily[0], big) if len(daily) > 1 else 1.0
        w = worlds[(big["gpus"], big["days"])]
        lin, exp = projection(w, big), projection(w, big, e)
        ledger = f"{lin['ledger_bytes_day'] / 1e9:,.1f} GB" if "ledger_bytes_day" in lin else ""
        lines.append(
            f"| {engine} | {big['gpus']:,} GPUs x 1 d | {e:.2f} | {_w(lin['rows_day'])} | "
            f"{lin['bytes_day'] / 1e9:,.2f} GB | {lin['bytes_year'] / 1e12:,.2f} TB | {ledger} | "
            f"{_minutes(lin['s_day_2'])} | {_minutes(exp['s_day_2'])} | "
            f"{_minutes(exp['s_day_16'])} | {_minutes(exp['s_day_64'])} |")
    ok = all(c[2] for c in checks)
    if checks:
        lines += ["", "| target | measured | result |", "|---|---:|---|"]
        lines += [f"| {n} | {v} | {'PASS' if g else 'FAIL'} |" for n, v, g in checks]
    # a run stopped by --timeout measured only part of its size: say so, never PASS it
    status = "PASS" if ok else "FAIL"
    if stopped and ok:
        status = (f"INCOMPLETE ({len(stopped)} run(s) stopped by --timeout; totals agree "
                  "where both engines finished)")
    return "\n".join(lines).replace("{status}", status), ok and not stopped


def _keep(started: datetime, worlds: dict, runs: list[dict]) -> None:
    """Every measurement so far, as JSON beside the outputs (a run cut short keeps them)."""
    path = OUT / f"engine-scale-{started:%Y%m%dT%H%M%S}.json"
    path.write_text(json.dumps({"worlds": {f"{g}x{d}": m for (g, d), m in worlds.items()},
                                "runs": runs}, indent=1))
    shutil.copyfile(path, OUT / "engine-scale-latest.json")


if __name__ == "__main__":
    results.entry(main, _child, child_args=4)
