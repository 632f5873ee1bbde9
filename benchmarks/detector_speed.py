"""Detector speed: a year of a 10,000-GPU cluster (≥ 10 M allocation intervals) in 60 s, 8 GB.

    python -m benchmarks.run detector_speed [--repeat N] [--fractions 0.25 0.5 1] [--no-write]

The simulator would take about 40 minutes for such a year, so the ledger is generated in DuckDB
by :data:`GENERATOR` (deterministic: every choice is a ``hash`` of node, slot and lane):

- 1,250 nodes × 8 GPUs (A100): 900 Slurm-only, 250 Kubernetes-only, 100 shared (Kubernetes from
  08:00 to 20:00 UTC, Slurm otherwise);
- each node is cut into 125-minute slots and two 4-GPU lanes; in every slot each lane holds one
  allocation starting 0-14 min into the slot and lasting 20-109 min (Slurm) or 40-109 min (pods),
  so it ends inside its slot and a node never holds more than its 8 GPUs. Slurm lanes are
  independent runs; the two Kubernetes lanes of a slot are the two pods of one gang Workload
  (a ``kueue_workloads`` row, ``pods_wanted = 2``) starting together;
- planted: one Kubernetes slot in 200 starts its second pod 20 minutes late (a partial gang: 4
  GPUs × 20 min wasted); one Slurm slot in 100 on a shared node gets an extra 4-GPU pod from
  minute 15 to 35 of the slot (double scheduling: the node holds 12 GPUs while both Slurm lanes
  and the pod run, so 2 incidents, one per Slurm run);
- intervals crossing midnight are cut there, as ``allocations`` is: every row is one interval.

A run is :func:`models.incidents.build_incidents` over every day of the ledger (all detectors:
the node-level sweep per day, partial gangs, GPU-level and idle ones, bridge pairs; the generated
ledger has no dcgm minute samples, so the GPU-level and idle detectors find nothing to read
here), in a fresh process on 2 threads with DuckDB's memory limit at 8 GB; time from the call to
its return, peak RSS from ``wait4``. Sizes: the first quarter, half and whole of the year (by
days), to show the growth. Every run's incident counts are checked against what was planted.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from benchmarks import results

NAME = "detector_speed"
DESCRIPTION = "detectors over a year of a 10,000-GPU cluster (≥ 10 M allocation intervals)"
OUT = Path(__file__).with_name("out")
START = date(2025, 1, 6)
DAYS = 365
NODES = {"hpc": 900, "k8s": 250, "shared": 100}
SLOT_MINUTES = 125
FRACTIONS = (0.25, 0.5, 1.0)
MAX_SECONDS = 60.0
MAX_PEAK_BYTES = 8 * 10**9  # 8 GB, decimal (the strict reading)
MIN_INTERVALS = 10_000_000
THREADS = 2

#: The synthetic ledger (parameters $start, $days, $hpc, $k8s, $shared, $slot).
GENERATOR = """
CREATE OR REPLACE TABLE gen_jobs AS
WITH nodes AS (
    SELECT n AS node_no, printf('node-%05d', n) AS node,
           CASE WHEN n < $hpc THEN 'hpc' WHEN n < $hpc + $k8s THEN 'k8s' ELSE 'shared' END
               AS pool
    FROM range($hpc + $k8s + $shared) AS t(n)
),
slots AS (
    SELECT s AS slot, CAST($start AS TIMESTAMP) + to_minutes(s * $slot) AS slot_start
    FROM range(CAST($days * 1440 / $slot AS BIGINT)) AS t(s)
),
grid AS (
    SELECT n.*, s.*, l.lane,
           CASE WHEN n.pool = 'k8s' OR (n.pool = 'shared'
               AND hour(s.slot_start) >= 8 AND hour(s.slot_start) < 20)
               THEN 'kubernetes' ELSE 'slurm' END AS domain
    FROM nodes AS n CROSS JOIN slots AS s CROSS JOIN (SELECT range AS lane FROM range(2)) AS l
),
timed AS (
    SELECT *,
        -- Kubernetes lanes are the two pods of one gang: same start and length
        CAST(CASE WHEN domain = 'kubernetes' THEN hash(node_no, slot, 'j') % 15
             ELSE hash(node_no, slot, lane, 'j') % 15 END AS BIGINT) AS jitter_min,
        CAST(CASE WHEN domain = 'kubernetes' THEN 40 + hash(node_no, slot, 'd') % 70
             ELSE 20 + hash(node_no, slot, lane, 'd') % 90 END AS BIGINT) AS minutes,
        domain = 'kubernetes' AND hash(node_no, slot, 'g') % 200 = 0 AS late_gang
    FROM grid
)
SELECT
    node, pool, domain, slot, lane, slot_start,
    slot_start + to_minutes(jitter_min + CASE WHEN late_gang AND lane = 1 THEN 20 ELSE 0 END)
        AS start_ts,
    slot_start + to_minutes(jitter_min + minutes) AS end_ts,
    4 AS gpus,
    late_gang,
    CASE WHEN domain = 'kubernetes' THEN 'wl-' || node || '-' || slot END AS workload,
    CASE WHEN domain = 'kubernetes' THEN 'pod-' || node || '-' || slot || '-' || lane
         ELSE 'bench:' || (slot * 10000 + node_no * 2 + lane) || ':0' END AS source_key,
    'u' || (hash(node_no, slot, lane, 'u') % 50) AS person
FROM timed
UNION ALL
-- planted double scheduling: an extra 4-GPU pod on a shared node during a Slurm slot
SELECT node, pool, 'kubernetes', slot, 2, slot_start,
       slot_start + INTERVAL 15 MINUTE, slot_start + INTERVAL 35 MINUTE, 4, FALSE,
       'wl-x-' || node || '-' || slot, 'pod-x-' || node || '-' || slot, 'intruder'
FROM grid
WHERE pool = 'shared' AND domain = 'slurm' AND lane = 0 AND hash(node_no, slot, 'x') % 100 = 0;

INSERT INTO allocations BY NAME
WITH pieces AS (
    -- cut at midnight: an allocation is shorter than a day, so one or two pieces
    SELECT *, start_ts AS piece_start,
           least(end_ts, date_trunc('day', start_ts) + INTERVAL 1 DAY) AS piece_end
    FROM gen_jobs
    UNION ALL
    SELECT *, date_trunc('day', end_ts), end_ts
    FROM gen_jobs
    WHERE date_trunc('day', end_ts) > start_ts AND date_trunc('day', end_ts) < end_ts
)
SELECT
    CAST(piece_start AS DATE) AS day, domain, 'bench' AS cluster, source_key,
    coalesce(workload, split_part(source_key, ':', 2)) AS job_id,
    source_key AS name, node, pool, 'a100' AS gpu_model, gpus,
    piece_start AS start_ts, piece_end AS end_ts,
    gpus * date_diff('second', piece_start, piece_end) AS gpu_seconds,
    CASE WHEN domain = 'kubernetes' THEN 'bench' END AS k8s_namespace,
    person, 'team-' || person AS team, 'CC-' || person AS cost_centre,
    CASE WHEN domain = 'kubernetes' THEN 'succeeded' ELSE 'completed' END AS outcome,
    'generated' AS evidence
FROM pieces;

INSERT INTO kueue_workloads BY NAME
SELECT
    workload AS uid, 'bench' AS namespace, workload AS name, 'Job' AS owner_kind,
    workload AS owner_name, 1 AS pod_sets, 2 AS pods_wanted, 4 AS gpus_per_pod,
    min(start_ts) AS admitted_at, max(start_ts) AS pods_ready_at, TRUE AS admitted,
    TRUE AS pods_ready, FALSE AS evicted
FROM gen_jobs
WHERE domain = 'kubernetes' AND workload NOT LIKE 'wl-x-%'
GROUP BY workload;

INSERT INTO nodes SELECT 'bench', node, any_value(pool), 'a100', 8, g.range, NULL, NULL
FROM gen_jobs, range(8) AS g GROUP BY node, g.range;

INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 2.50, 'EUR');
"""

#: Diagnostic, not a target: one day of dcgm-exporter minute samples of $gpus GPUs (8 per node,
#: every GPU held by its node's pod; the pods of one node in 500 stay at 1 % busy all day, so the
#: idle detector has something to find), for the detectors that read minute samples.
MINUTES_GENERATOR = """
INSERT INTO gpu_utilization (cluster, gpu_uuid, node, gpu_index, bucket_start, busy_fraction,
                             samples, namespace, pod)
SELECT 'bench', 'GPU-' || g, printf('node-%05d', g // 8), g % 8,
       CAST($start AS TIMESTAMP) + to_minutes(m),
       CASE WHEN (g // 8) % 500 = 0 THEN 0.01 ELSE 0.2 + (hash(g, m) % 70) / 100.0 END, 1,
       'bench', 'pod-' || (g // 8)
FROM range($gpus) AS a(g), range(1440) AS b(m);

INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, node, gpu_model, gpus,
                         start_ts, end_ts, gpu_seconds, k8s_namespace, person, team,
                         cost_centre)
SELECT CAST($start AS DATE), 'kubernetes', 'bench', 'uid-' || n, 'wl-' || n, 'pod-' || n,
       printf('node-%05d', n), 'a100', 8, CAST($start AS TIMESTAMP),
       CAST($start AS TIMESTAMP) + INTERVAL 1 DAY, 8 * 86400, 'bench', 'p', 't', 'cc'
FROM range(CAST(ceil($gpus / 8) AS BIGINT)) AS t(n);

INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 2.50, 'EUR');
"""

PLANTED_SQL = """
SELECT
    count(DISTINCT workload) FILTER (WHERE late_gang) AS partial_gangs,
    2 * count(*) FILTER (WHERE workload LIKE 'wl-x-%') AS double_scheduled
FROM gen_jobs
WHERE start_ts < $end
"""


def _execute(con, script: str, params: dict[str, object]) -> None:
    """Run the statements of ``script`` (``;`` at a line end), each with the parameters it names."""
    for statement in script.split(";\n"):
        if statement.strip():
            con.execute(statement, {k: v for k, v in params.items() if f"${k}" in statement})


def generate_minutes(db: Path, gpus: int) -> dict[str, float]:
    """The diagnostic ledger: one day of minute samples of ``gpus`` GPUs (MINUTES_GENERATOR)."""
    import duckdb

    from models.runner import ensure_schema

    t = time.perf_counter()
    con = duckdb.connect(str(db))
    try:
        ensure_schema(con)
        _execute(con, MINUTES_GENERATOR, {"start": START, "gpus": gpus})
        rows = con.execute("SELECT count(*) FROM gpu_utilization").fetchone()[0]
    finally:
        con.close()
    return {"rows": rows, "generate_s": time.perf_counter() - t, "idle_nodes": -(-gpus // 8 // 500)}


def generate(db: Path, days: int) -> dict[str, float]:
    """Write the synthetic ledger of ``days`` days into a fresh ``db``."""
    import duckdb

    from models.runner import ensure_schema

    t = time.perf_counter()
    con = duckdb.connect(str(db))
    try:
        ensure_schema(con)
        _execute(con, GENERATOR, {"start": START, "days": days, "hpc": NODES["hpc"],
                                  "k8s": NODES["k8s"], "shared": NODES["shared"],
                                  "slot": SLOT_MINUTES})
        intervals = con.execute("SELECT count(*) FROM allocations").fetchone()[0]
        end = START + timedelta(days=days)
        gangs, doubles = con.execute(PLANTED_SQL, {"end": end}).fetchone()
    finally:
        con.close()
    return {"intervals": intervals, "planted_partial_gangs": gangs,
            "planted_double_scheduled": doubles, "generate_s": time.perf_counter() - t,
            "bytes": db.stat().st_size}


def _child(db: str, result: str) -> None:
    """One timed run of the detectors over every day of ``db`` (in this fresh process)."""
    import duckdb

    from models.incidents import build_incidents

    con = duckdb.connect(db)
    con.execute(f"SET threads = {THREADS}")
    con.execute("SET memory_limit = '8GB'")
    first, last = con.execute("SELECT min(day), max(day) FROM allocations").fetchone()
    cpu0, t0 = time.process_time(), time.perf_counter()
    built = build_incidents(con, first, last, tolerance_seconds=60)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    con.close()
    Path(result).write_text(json.dumps({"wall": wall, "cpu": cpu, **built.by_kind,
                                        "bridge_pairs": built.bridge_pairs}))


@dataclass
class Run:
    days: int
    intervals: int
    wall: float
    cpu: float
    peak_bytes: int
    load1: float
    found: dict[str, int]
    planted: dict[str, int]

    @property
    def counts_ok(self) -> bool:
        return (self.found.get("partial_gang") == self.planted["planted_partial_gangs"]
                and self.found.get("double_scheduled")
                == self.planted["planted_double_scheduled"]
                and self.found.get("idle_allocation") == 0)


def _run_child(db: Path) -> tuple[dict, int, float]:
    """One timed run in a fresh process on a copy of ``db`` (so every run starts alike):
    the child's result, its peak RSS in bytes (``wait4``) and the 1-minute load before."""
    with tempfile.TemporaryDirectory(dir=OUT, prefix="run-detector-speed-") as tmp:
        work, result = Path(tmp) / "ledger.duckdb", Path(tmp) / "result.json"
        shutil.copyfile(db, work)
        load1 = os.getloadavg()[0]
        out, peak = results.run_child("benchmarks.detector_speed", [str(work), str(result)],
                                      result, "detector")
        return out, peak, load1


def measure(db: Path, days: int, planted: dict[str, float]) -> Run:
    out, peak, load1 = _run_child(db)
    found = {k: out[k] for k in ("double_scheduled", "partial_gang", "idle_allocation")}
    return Run(days, int(planted["intervals"]), out["wall"], out["cpu"], peak, load1, found,
               {k: int(v) for k, v in planted.items() if k.startswith("planted")})



def report(runs: dict[int, list[Run]], gen: dict[int, dict[str, float]], repeat: int,
           load_before: str, load_after: str,
           minutes: tuple[int, dict[str, float], list[Run]] | None = None) -> tuple[str, bool]:
    import duckdb

    best = {d: min(rs, key=lambda r: r.wall) for d, rs in runs.items()}
    full = best[max(best)]
    smallest = best[min(best)]
    lines = [
        f"## {NAME} — {DESCRIPTION}",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M:%S %Z')} with "
        f"`python -m benchmarks.run {NAME} -- --repeat {repeat}`.",
        "",
        f"- Machine: {results.cores()} cores ({results.cpu_model()}), "
        f"{results.memory_gib() or 0:.0f} GiB RAM; Python {platform.python_version()}, DuckDB "
        f"{duckdb.__version__}. Load average before: {load_before}; after: {load_after} (other "
        "jobs shared the cores).",
        f"- Ledger: generated in DuckDB (`benchmarks/detector_speed.py` `GENERATOR`): "
        f"{sum(NODES.values()):,} nodes × 8 GPUs = {8 * sum(NODES.values()):,} GPUs "
        f"({NODES['hpc']} Slurm, {NODES['k8s']} Kubernetes, {NODES['shared']} shared), "
        f"{SLOT_MINUTES}-minute slots × two 4-GPU lanes, cut at midnight, from {START}; "
        "planted partial gangs and double-scheduled pods (counts below).",
        f"- Each run: `build_incidents` over every day, in a fresh process, DuckDB threads = "
        f"{THREADS}, memory_limit = 8GB; best of {repeat}; peak RSS = the process's "
        "`ru_maxrss` (highest of the runs).",
        "",
        "| days | allocation intervals | DB size | generate s | best s | all runs (s) | "
        "CPU s | intervals/s | peak RSS | found (double / gang / idle) | planted "
        "(double / gang) |",
        "|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---|",
    ]
    for days in sorted(best):
        b, g = best[days], gen[days]
        peak = max(r.peak_bytes for r in runs[days])
        lines.append(
            f"| {days} | {b.intervals:,} | {results.mib(g['bytes'])} | {g['generate_s']:.0f} | "
            f"{b.wall:.2f} | {', '.join(f'{r.wall:.2f}' for r in runs[days])} | {b.cpu:.1f} | "
            f"{b.intervals / b.wall:,.0f} | {results.mib(peak)} | "
            f"{b.found['double_scheduled']} / {b.found['partial_gang']} / "
            f"{b.found['idle_allocation']} | {b.planted['planted_double_scheduled']} / "
            f"{b.planted['planted_partial_gangs']} |")
    growth = (full.wall / smallest.wall) / (full.intervals / smallest.intervals)
    peak_full = max(r.peak_bytes for r in runs[max(runs)])
    counts_ok = all(r.counts_ok for rs in runs.values() for r in rs)
    checks = [
        (f"≥ {MIN_INTERVALS:,} allocation intervals", f"{full.intervals:,}",
         full.intervals >= MIN_INTERVALS),
        (f"year within {MAX_SECONDS:.0f} s (2 threads)", f"{full.wall:.2f} s",
         full.wall <= MAX_SECONDS),
        (f"peak RSS ≤ 8 GB ({MAX_PEAK_BYTES:,} bytes)", results.mib(peak_full),
         peak_full <= MAX_PEAK_BYTES),
        ("near-linear growth: (time ratio) / (size ratio), smallest to largest, ≤ 1.5",
         f"{growth:.2f}", growth <= 1.5),
        ("every planted incident found, nothing else", "yes" if counts_ok else "no",
         counts_ok),
    ]
    lines += ["", "| target | measured | result |", "|---|---:|---|"]
    lines += [f"| {label} | {value} | {'PASS' if good else 'FAIL'} |"
              for label, value, good in checks]
    ok = all(good for *_, good in checks)
    if minutes is not None:
        gpus, info, mruns = minutes
        m = min(mruns, key=lambda r: r.wall)
        lines += [
            "",
            f"Diagnostic, not a target (the detectors that read dcgm-exporter minute samples: "
            f"GPU-level double scheduling and idle allocations): one UTC day of {gpus:,} GPUs at "
            f"one sample a minute ({int(info['rows']):,} `gpu_utilization` rows, generated by "
            f"`MINUTES_GENERATOR` in {info['generate_s']:.0f} s), `build_incidents` for that day: "
            f"best {m.wall:.2f} s of {', '.join(f'{r.wall:.2f}' for r in mruns)} s, CPU "
            f"{m.cpu:.1f} s, peak RSS {results.mib(max(r.peak_bytes for r in mruns))}; found "
            f"{m.found['idle_allocation']} idle allocations (planted: {int(info['idle_nodes'])}"
            f" pods at 1 % busy all day). A daily partition reads the day before and after too, "
            "so a day between two others reads three days of samples.",
        ]
    lines[2] = lines[2].rstrip(".") + f": **{'PASS' if ok else 'FAIL'}**."
    return "\n".join(lines) + "\n", ok


def main(argv: list[str] | None = None) -> int:
    p = results.parser(NAME, DESCRIPTION)
    p.add_argument("--repeat", type=int, default=2, help="runs per size, best counts (default 2)")
    p.add_argument("--fractions", type=float, nargs="+", default=list(FRACTIONS),
                   help="sizes as fractions of the year (default 0.25 0.5 1)")
    p.add_argument("--minute-gpus", type=int, default=8 * sum(NODES.values()),
                   help="GPUs of the minute-sample diagnostic (0: skip; default the cluster's)")
    args = p.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    load_before = results.load_average()
    runs: dict[int, list[Run]] = {}
    gen: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(dir=OUT, prefix="detector-speed-") as tmp:
        for fraction in args.fractions:
            days = max(1, round(DAYS * fraction))
            db = Path(tmp) / f"ledger-{days}.duckdb"
            gen[days] = generate(db, days)
            print(f"{days} days: {gen[days]['intervals']:,} intervals generated in "
                  f"{gen[days]['generate_s']:.0f} s", flush=True)
            runs[days] = []
            for r in range(args.repeat):
                run = measure(db, days, gen[days])
                runs[days].append(run)
                print(f"  [{r + 1}/{args.repeat}] {run.wall:.2f} s (cpu {run.cpu:.1f} s, peak "
                      f"{results.mib(run.peak_bytes)}, load {run.load1:.2f}) found {run.found}",
                      flush=True)
            db.unlink()
        minutes = None
        if args.minute_gpus > 0:
            db = Path(tmp) / "minutes.duckdb"
            info = generate_minutes(db, args.minute_gpus)
            mruns = []
            for r in range(args.repeat):
                out, peak, load1 = _run_child(db)
                found = {k: out[k] for k in ("double_scheduled", "partial_gang",
                                             "idle_allocation")}
                mruns.append(Run(1, 0, out["wall"], out["cpu"], peak, load1, found, {}))
                print(f"  minutes [{r + 1}/{args.repeat}] {out['wall']:.2f} s found {found}",
                      flush=True)
            minutes = (args.minute_gpus, info, mruns)
    text, ok = report(runs, gen, args.repeat, load_before, results.load_average(), minutes)
    return results.publish(NAME, text, ok, write=not args.no_write)


if __name__ == "__main__":
    results.entry(main, _child, 2)
