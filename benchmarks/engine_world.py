"""A generated GPU estate at minute grain, written directly as a Parquet lake (issue #18 item 6).

    python -m benchmarks.engine_world --gpus 1000 --days 7 --out DIR [--seed 1]

The simulator writes OpenMetrics that the ingest would have to read back (hours for 100 M
samples); this writes what the ingest would have stored, straight to Parquet, with DuckDB
``COPY``, one UTC day at a time (never the whole window in memory). Deterministic: every choice
is a DuckDB ``hash`` of the seed and the node, lane, slot, block or minute, so the same
:class:`WorldSpec` gives the same rows (not necessarily in the same order within a file).

The estate (:class:`WorldSpec`):

- nodes of 8 GPUs (``a100``); the first ``slurm_share`` of the nodes are Slurm nodes (partition
  ``gpu``), the others Kubernetes (node pool ``gpu-pool``);
- each node is two lanes of 4 GPUs; time is cut into ``slot_minutes`` slots from the window's
  start; in a slot a lane holds one allocation with probability ``busy_lanes_pct`` %, starting
  0-19 minutes into the slot and lasting 180-399 minutes (hours-long pods and jobs, ending inside
  their slot, so a GPU never has two holders); slots of 7 h cross midnight, allocations are cut
  there as ``allocations`` is, and at the window's end;
- while held, a GPU is busy (30-95 %, six decimals as dcgm-exporter's averages have) except in
  idle 20-minute blocks (``idle_block_pct`` %, 0-3 % busy); one allocation in ``idle_job_every``
  is idle all along (0-2 %), so the idle detector has real work; an unheld GPU reads 0 % with no
  holder;
- dcgm-exporter gaps: one node-day in ``gap_every`` loses ``GAP_MINUTES`` minutes of rows (an
  outage is missing rows, never zeros);
- 30 s scrapes: each 1-minute bucket has ``samples = 2``.

Written (lake layout of models/lake.py; partition columns not inside the files):

- ``<root>/gpu_utilization/cluster=<c>/day=<YYYY-MM-DD>/part-0.parquet`` (every column of
  ``GPU_UTILIZATION`` but ``cluster``), ZSTD;
- small tables as ``<root>/<table>/part-0.parquet`` with their ledger columns:
  ``allocations`` (the ledger rows of the allocations the samples name), ``slurm_runs``,
  ``slurm_node_allocations``, ``gpu_busy_daily`` (from the written samples), ``nodes``,
  ``rate_card``;
- ``<root>/world.json``: the spec, rows per table, bytes, and seconds per day.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

import duckdb

from models.runner import ensure_schema
from models.schema import (
    ALLOCATIONS,
    GPU_BUSY_DAILY,
    GPU_UTILIZATION,
    NODES,
    RATE_CARD,
    SLURM_NODE_ALLOCATIONS,
    SLURM_RUNS,
)

GPUS_PER_NODE = 8
LANE_GPUS = 4
SCRAPE_SECONDS = 30
GAP_MINUTES = 20
GPU_MODEL = "a100"
DCGM_MODEL = "NVIDIA A100-SXM4-80GB"
METRIC = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
SMALL_TABLES = (ALLOCATIONS, SLURM_RUNS, SLURM_NODE_ALLOCATIONS, GPU_BUSY_DAILY, NODES,
                RATE_CARD)


@dataclass(frozen=True)
class WorldSpec:
    """What to generate: ``gpus`` (a multiple of 8) for ``days`` UTC days from ``start``."""

    gpus: int
    days: int
    start: date = date(2026, 1, 5)
    seed: int = 1
    cluster: str = "bench"
    slurm_share: float = 0.5
    slot_minutes: int = 420
    busy_lanes_pct: int = 88
    idle_block_pct: int = 12
    idle_job_every: int = 40
    gap_every: int = 40

    def check(self) -> None:
        if self.gpus <= 0 or self.gpus % GPUS_PER_NODE:
            msg = f"expected a positive multiple of {GPUS_PER_NODE} GPUs, found {self.gpus}"
            raise ValueError(msg)
        if self.days <= 0:
            msg = f"expected one day or more, found {self.days}"
            raise ValueError(msg)
        if self.slot_minutes < 420:
            msg = ("expected slots of 420 minutes or more (an allocation starts up to 19 min "
                   f"in and lasts up to 399 min), found {self.slot_minutes}")
            raise ValueError(msg)
        if not 0 <= self.slurm_share <= 1:
            msg = f"expected slurm_share in [0, 1], found {self.slurm_share}"
            raise ValueError(msg)

    @property
    def nodes(self) -> int:
        return self.gpus // GPUS_PER_NODE

    @property
    def slurm_nodes(self) -> int:
        return round(self.nodes * self.slurm_share)

    @property
    def window_start(self) -> datetime:
        return datetime.combine(self.start, datetime.min.time())

    @property
    def window_end(self) -> datetime:
        return self.window_start + timedelta(days=self.days)

    def day(self, i: int) -> date:
        return self.start + timedelta(days=i)


def partition_file(root: Path, table: str, cluster: str, day: date) -> Path:
    """The one file of a (cluster, day) partition of a high-volume lake table."""
    return root / table / f"cluster={cluster}" / f"day={day:%Y-%m-%d}" / "part-0.parquet"


def table_file(root: Path, table: str) -> Path:
    """The one file of a small lake table."""
    return root / table / "part-0.parquet"


def utilization_glob(root: Path) -> str:
    return str(root / "gpu_utilization" / "*" / "*" / "*.parquet")


def _macros(spec: WorldSpec) -> list[str]:
    """The world's choices as SQL macros (integers inlined: the spec is validated)."""
    s, slot = int(spec.seed), int(spec.slot_minutes)
    return [
        # one hash per (node, lane, slot): whether the lane holds an allocation and its shape
        f"CREATE OR REPLACE MACRO job_hash(n, lane, slot) AS hash({s}, CAST(n AS BIGINT), "
        "CAST(lane AS BIGINT), CAST(slot AS BIGINT))",
        f"CREATE OR REPLACE MACRO job_exists(h) AS h % 100 < {int(spec.busy_lanes_pct)}",
        "CREATE OR REPLACE MACRO job_jitter(h) AS CAST((h // 256) % 20 AS BIGINT)",
        "CREATE OR REPLACE MACRO job_minutes(h) AS CAST(180 + (h // 65536) % 220 AS BIGINT)",
        f"CREATE OR REPLACE MACRO idle_job(h) AS (h // 16777216) % {int(spec.idle_job_every)} = 0",
        "CREATE OR REPLACE MACRO job_team(h) AS CAST((h // 4294967296) % 20 AS BIGINT)",
        "CREATE OR REPLACE MACRO job_person(h) AS CAST((h // 1099511627776) % 200 AS BIGINT)",
        f"CREATE OR REPLACE MACRO slot_of(minute) AS minute // {slot}",
        f"CREATE OR REPLACE MACRO slot_offset(minute) AS minute % {slot}",
        "CREATE OR REPLACE MACRO job_id_raw(n, lane, slot) AS "
        "1000000 + slot * 50000 + n * 2 + lane",
        "CREATE OR REPLACE MACRO pod_uid(n, lane, slot) AS "
        "printf('%08x-%04x-4b1d-8000-%012x', n, lane, slot)",
        "CREATE OR REPLACE MACRO pod_name(n, lane, slot) AS "
        "printf('train-%05d-%d-%d', n, lane, slot)",
        "CREATE OR REPLACE MACRO node_name(n) AS printf('gpu-%05d', n)",
        "CREATE OR REPLACE MACRO gpu_uuid(n, i) AS printf('GPU-%08x-0000-4000-8000-%012x', n, i)",
        f"CREATE OR REPLACE MACRO busy_block(n, lane, slot, block) AS "
        f"hash({s}, CAST(n AS BIGINT), CAST(lane AS BIGINT), CAST(slot AS BIGINT), "
        f"CAST(block AS BIGINT), 'b') % 100 < {int(spec.idle_block_pct)}",
        f"CREATE OR REPLACE MACRO noise(g, minute) AS hash({s}, CAST(g AS BIGINT), "
        "CAST(minute AS BIGINT), 'u')",
        f"CREATE OR REPLACE MACRO gap_start(n, d) AS CASE WHEN hash({s}, CAST(n AS BIGINT), "
        f"CAST(d AS BIGINT), 'gap') % {int(spec.gap_every)} = 0 THEN CAST(hash({s}, "
        f"CAST(n AS BIGINT), CAST(d AS BIGINT), 'at') % {1440 - GAP_MINUTES} AS BIGINT) END",
    ]


#: One UTC day of minute buckets; $day_no, $day_ts, $slurm_nodes, $gpus. Minutes count from the
#: window's start (slots start there).
DAY_SQL = """
WITH grid AS (
    SELECT g, g // 8 AS n, g % 8 AS i, (g % 8) // 4 AS lane,
           $day_no * 1440 + m AS minute, m
    FROM range($gpus) AS a(g), range(1440) AS b(m)
),
shaped AS (
    SELECT *, slot_of(minute) AS slot, slot_offset(minute) AS off,
           job_hash(n, lane, slot_of(minute)) AS h, gap_start(n, $day_no) AS gap
    FROM grid
),
held AS (
    SELECT *, job_exists(h) AND off >= job_jitter(h) AND off < job_jitter(h) + job_minutes(h)
              AS held,
           n < $slurm_nodes AS slurm
    FROM shaped
    WHERE gap IS NULL OR m < gap OR m >= gap + {gap_minutes}
)
SELECT
    gpu_uuid(n, i) AS gpu_uuid,
    CAST(NULL AS VARCHAR) AS gpu_instance,
    node_name(n) AS node,
    CAST(i AS INTEGER) AS gpu_index,
    '{dcgm_model}' AS gpu_model,
    CAST($day_ts AS TIMESTAMP) + to_minutes(m) AS bucket_start,
    CAST(CASE
        WHEN NOT held THEN 0.0
        WHEN idle_job(h) THEN (noise(g, minute) % 20001) / 1e6
        WHEN busy_block(n, lane, slot, (off - job_jitter(h)) // 20)
            THEN (noise(g, minute) % 30001) / 1e6
        ELSE 0.30 + (noise(g, minute) % 650001) / 1e6
    END AS DOUBLE) AS busy_fraction,
    CAST(2 AS BIGINT) AS samples,
    CASE WHEN held AND NOT slurm THEN 'team-' || job_team(h) END AS namespace,
    CASE WHEN held AND NOT slurm THEN pod_name(n, lane, slot) END AS pod,
    CASE WHEN held AND NOT slurm THEN 'main' END AS container,
    CASE WHEN held AND NOT slurm THEN pod_uid(n, lane, slot) END AS pod_uid,
    CASE WHEN held AND slurm THEN CAST(job_id_raw(n, lane, slot) AS VARCHAR) END AS hpc_job,
    '{metric}' AS metric,
    CAST(NULL AS VARCHAR) AS gpu_instance_profile,
    CASE WHEN held THEN 'exporter_labels' END AS attribution,
    -- device-plugin GPUs: no DRA claim on any reading
    CAST(NULL AS VARCHAR) AS dra_claim_namespace,
    CAST(NULL AS VARCHAR) AS dra_claim_name,
    CAST(NULL AS VARCHAR) AS dra_driver_name,
    CAST(NULL AS VARCHAR) AS dra_pool_name,
    CAST(NULL AS VARCHAR) AS dra_device_name,
    CAST(NULL AS VARCHAR) AS dra_mig_profile,
    CAST(NULL AS VARCHAR) AS dra_mig_device_uuid
FROM held
"""

#: The allocations of the window, one row per (node, lane, slot) held; $nodes, $slurm_nodes,
#: $slots, $start, $end.
JOBS_SQL = """
CREATE OR REPLACE TEMP TABLE gen_jobs AS
WITH lanes AS (
    SELECT n, lane, s AS slot, job_hash(n, lane, s) AS h
    FROM range($nodes) AS a(n), range(2) AS b(lane), range($slots) AS c(s)
),
timed AS (
    SELECT *, n < $slurm_nodes AS slurm,
           CAST($start AS TIMESTAMP) + to_minutes(slot * {slot} + job_jitter(h)) AS start_ts,
           least(CAST($start AS TIMESTAMP) + to_minutes(slot * {slot} + job_jitter(h)
                                                        + job_minutes(h)),
                 CAST($end AS TIMESTAMP)) AS end_ts
    FROM lanes
    WHERE job_exists(h)
)
SELECT *, node_name(n) AS node, job_id_raw(n, lane, slot) AS job_id_raw,
       pod_uid(n, lane, slot) AS uid, pod_name(n, lane, slot) AS pod,
       'team-' || job_team(h) AS team, 'user-' || job_person(h) AS person
FROM timed
WHERE start_ts < CAST($end AS TIMESTAMP)
"""

ALLOCATIONS_SQL = """
INSERT INTO allocations BY NAME
WITH pieces AS (
    SELECT *, start_ts AS piece_start,
           least(end_ts, date_trunc('day', start_ts) + INTERVAL 1 DAY) AS piece_end
    FROM gen_jobs
    UNION ALL
    SELECT *, date_trunc('day', end_ts), end_ts
    FROM gen_jobs
    WHERE date_trunc('day', end_ts) > start_ts AND date_trunc('day', end_ts) < end_ts
)
SELECT
    CAST(piece_start AS DATE) AS day,
    CASE WHEN slurm THEN 'slurm' ELSE 'kubernetes' END AS domain,
    $cluster AS cluster,
    CASE WHEN slurm THEN $cluster || ':' || job_id_raw ELSE uid END AS source_key,
    CASE WHEN slurm THEN CAST(job_id_raw AS VARCHAR) ELSE pod END AS job_id,
    CASE WHEN slurm THEN 'train' ELSE pod END AS name,
    node,
    CASE WHEN slurm THEN 'gpu' ELSE 'gpu-pool' END AS pool,
    '{gpu_model}' AS gpu_model,
    {lane_gpus} AS gpus,
    piece_start AS start_ts,
    piece_end AS end_ts,
    {lane_gpus} * date_diff('second', piece_start, piece_end) AS gpu_seconds,
    CAST({lane_gpus} * date_diff('second', piece_start, piece_end) AS DECIMAL(18, 3))
        AS physical_gpu_seconds,
    {lane_gpus}.0 AS capacity_gpus,
    CASE WHEN slurm THEN person END AS slurm_user,
    CASE WHEN slurm THEN team END AS slurm_account,
    CASE WHEN slurm THEN 'normal' END AS qos,
    CASE WHEN NOT slurm THEN team END AS k8s_namespace,
    CASE WHEN NOT slurm THEN 'default' END AS k8s_service_account,
    person,
    team,
    'CC-' || team AS cost_centre,
    'generated' AS identity_evidence,
    'identity_map' AS identity_source,
    CASE WHEN slurm THEN 'completed' ELSE 'succeeded' END AS outcome,
    'benchmarks/engine_world.py' AS evidence
FROM pieces
"""

SLURM_SQL = """
INSERT INTO slurm_runs BY NAME
SELECT $cluster || ':' || job_id_raw AS run_key, $cluster AS cluster,
       CAST(job_id_raw AS VARCHAR) AS job_id, job_id_raw, 'train' AS job_name, person AS "user",
       team AS account, 'gpu' AS partition, 'normal' AS qos, 'COMPLETED' AS state,
       start_ts AS submit, start_ts AS eligible, start_ts AS start, end_ts AS "end",
       date_diff('second', start_ts, end_ts) AS elapsed_s, 1 AS alloc_nodes, node AS nodelist,
       [node] AS nodes, 'gres/gpu={lane_gpus}' AS alloc_tres, {lane_gpus} AS alloc_gpus,
       CAST($end AS TIMESTAMP) AS observed_until
FROM gen_jobs WHERE slurm;

INSERT INTO slurm_node_allocations BY NAME
SELECT $cluster || ':' || job_id_raw AS run_key, $cluster AS cluster,
       CAST(job_id_raw AS VARCHAR) AS job_id, job_id_raw, node, 0 AS node_index,
       {lane_gpus} AS gpus, '{gpu_model}' AS gpu_model, start_ts AS start, end_ts AS "end",
       'single_node' AS gpus_source
FROM gen_jobs WHERE slurm;

INSERT INTO nodes BY NAME
SELECT $cluster AS cluster, node_name(n) AS node,
       CASE WHEN n < $slurm_nodes THEN 'slurm' ELSE 'kubernetes' END AS pool,
       '{gpu_model}' AS gpu_model, 8 AS gpu_count, i AS gpu_index, gpu_uuid(n, i) AS gpu_uuid,
       CASE WHEN n < $slurm_nodes THEN 'gpu' END AS slurm_partition
FROM range($nodes) AS a(n), range(8) AS b(i);

INSERT INTO rate_card VALUES ('{gpu_model}', '', '', NULL, NULL, 2.50, 'EUR')
"""

BUSY_DAILY_SQL = """
INSERT INTO gpu_busy_daily BY NAME
SELECT $cluster AS cluster, gpu_uuid, gpu_instance, node, CAST($day_ts AS DATE) AS day,
       sum(busy_fraction * samples * {scrape}) AS busy_seconds,
       sum(samples * {scrape}) AS covered_seconds, sum(samples) AS samples,
       {scrape}.0 AS scrape_interval_s, 'gpu' AS device_kind
FROM read_parquet($file)
GROUP BY ALL
"""


def _execute(con: duckdb.DuckDBPyConnection, script: str, params: dict[str, object]) -> None:
    for statement in script.split(";\n"):
        if statement.strip():
            con.execute(statement, {k: v for k, v in params.items() if f"${k}" in statement})


def _fill(sql: str, spec: WorldSpec) -> str:
    return sql.format(gap_minutes=GAP_MINUTES, dcgm_model=DCGM_MODEL, metric=METRIC,
                      slot=int(spec.slot_minutes), gpu_model=GPU_MODEL, lane_gpus=LANE_GPUS,
                      scrape=SCRAPE_SECONDS)


def _sql_path(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def generate(spec: WorldSpec, root: Path, *, threads: int = 2, log=None) -> dict:
    """Write the world of ``spec`` under ``root`` (replaced whole); returns what world.json says."""
    spec.check()
    tmp = root.with_name(root.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    con = duckdb.connect()
    try:
        con.execute(f"SET threads = {int(threads)}")
        con.execute("SET preserve_insertion_order = false")
        ensure_schema(con, SMALL_TABLES)
        for macro in _macros(spec):
            con.execute(macro)
        common = {"nodes": spec.nodes, "slurm_nodes": spec.slurm_nodes, "cluster": spec.cluster,
                  "start": spec.window_start, "end": spec.window_end, "gpus": spec.gpus,
                  "slots": -(-spec.days * 1440 // spec.slot_minutes)}
        t0 = time.perf_counter()
        _execute(con, _fill(JOBS_SQL, spec), common)
        _execute(con, _fill(ALLOCATIONS_SQL, spec), common)
        _execute(con, _fill(SLURM_SQL, spec), common)
        days = []
        for d in range(spec.days):
            t = time.perf_counter()
            day = spec.day(d)
            target = partition_file(tmp, GPU_UTILIZATION.name, spec.cluster, day)
            target.parent.mkdir(parents=True)
            params = {**common, "day_no": d, "day_ts": datetime.combine(day, datetime.min.time())}
            sql = _fill(DAY_SQL, spec)
            con.execute(f"COPY ({sql}) TO {_sql_path(target)} (FORMAT parquet, "
                        "COMPRESSION zstd)",
                        {k: v for k, v in params.items() if f"${k}" in sql})
            copy_s = time.perf_counter() - t
            _execute(con, _fill(BUSY_DAILY_SQL, spec), {**params, "file": str(target)})
            rows = con.execute("SELECT count(*) FROM read_parquet(?)", [str(target)]).fetchone()[0]
            days.append({"day": f"{day}", "rows": rows, "bytes": target.stat().st_size,
                         "copy_s": round(copy_s, 3), "seconds": round(time.perf_counter() - t, 3)})
            if log:
                log(f"  day {day}: {rows:,} rows, {target.stat().st_size / 1e6:,.0f} MB "
                    f"in {days[-1]['seconds']:.1f} s")
        counts = {}
        for table in SMALL_TABLES:
            target = table_file(tmp, table.name)
            target.parent.mkdir(parents=True)
            con.execute(f"COPY {table.name} TO {_sql_path(target)} (FORMAT parquet)")
            counts[table.name] = con.execute(f"SELECT count(*) FROM {table.name}").fetchone()[0]
        seconds = time.perf_counter() - t0
    finally:
        con.close()
    rows = sum(d["rows"] for d in days)
    meta = {"spec": {**asdict(spec), "start": f"{spec.start}"}, "utilization_rows": rows,
            "utilization_bytes": sum(d["bytes"] for d in days), "days": days,
            "small_rows": counts, "seconds": round(seconds, 3),
            "rows_per_s": round(rows / seconds) if seconds else 0}
    (tmp / "world.json").write_text(json.dumps(meta, indent=1))
    shutil.rmtree(root, ignore_errors=True)
    tmp.replace(root)
    return meta


def cached(spec: WorldSpec, root: Path, log=None) -> dict:
    """The world of ``spec`` under ``root``: generated unless already there for that spec."""
    meta_path = root / "world.json"
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        if meta.get("spec") == {**asdict(spec), "start": f"{spec.start}"}:
            return meta
    return generate(spec, root, log=log)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.engine_world",
                                description="write a generated GPU estate as a Parquet lake")
    p.add_argument("--gpus", type=int, required=True)
    p.add_argument("--days", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--start", type=date.fromisoformat, default=date(2026, 1, 5))
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    spec = WorldSpec(args.gpus, args.days, args.start, args.seed)
    meta = generate(spec, args.out, log=print)
    print(f"{meta['utilization_rows']:,} gpu_utilization rows, "
          f"{meta['utilization_bytes'] / 1e6:,.0f} MB, in {meta['seconds']:.1f} s "
          f"({meta['rows_per_s']:,} rows/s) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
