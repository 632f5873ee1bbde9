"""Hand-made ledger rows for the idle and precedence tests: allocations of pods and Slurm jobs on
cluster ``c`` (GPU model a100) and their dcgm-exporter minutes, inserted straight into the
ledger's tables (the detectors' inputs, no ingest in between)."""

from collections.abc import Callable
from datetime import datetime, timedelta

import duckdb


def insert_pod(con: duckdb.DuckDBPyConnection, uid: str, gpus: int, start: datetime,
               end: datetime, *, node: str = "n1", workload: str = "wl",
               namespace: str = "ns") -> None:
    con.execute("INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, node, "
                "gpu_model, gpus, start_ts, end_ts, gpu_seconds, k8s_namespace, person) "
                "VALUES (?, 'kubernetes', 'c', ?, ?, ?, ?, 'a100', ?, ?, ?, ?, ?, 'alice')",
                [start.date(), uid, workload, f"pod-{uid}", node, gpus, start, end,
                 gpus * int((end - start).total_seconds()), namespace])
    con.execute("INSERT INTO k8s_pod_allocations (cluster, namespace, pod, uid, node, gpus, "
                "start_ts, end_ts, scrape_interval_s) VALUES ('c', ?, ?, ?, ?, ?, ?, ?, 60)",
                [namespace, f"pod-{uid}", uid, node, gpus, start, end])


def insert_slurm_job(con: duckdb.DuckDBPyConnection, job: int, gpus: int, start: datetime,
                     end: datetime, *, node: str = "n1", partition: str = "gpu") -> None:
    key = f"c:{job}:0"
    con.execute("INSERT INTO slurm_runs (run_key, cluster, job_id, job_id_raw, partition, start, "
                "\"end\", alloc_gpus, nodes, source_file, line_no) "
                "VALUES (?, 'c', ?, ?, ?, ?, ?, ?, [?], 'dump', ?)",
                [key, str(job), job, partition, start, end, gpus, node, job])
    con.execute("INSERT INTO slurm_node_allocations (run_key, cluster, job_id, job_id_raw, "
                "node, gpus, start, \"end\") VALUES (?, 'c', ?, ?, ?, ?, ?, ?)",
                [key, str(job), job, node, gpus, start, end])
    con.execute("INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, node, "
                "pool, gpu_model, gpus, start_ts, end_ts, gpu_seconds, person) VALUES "
                "(?, 'slurm', 'c', ?, ?, 'job', ?, ?, 'a100', ?, ?, ?, ?, 'erin')",
                [start.date(), key, str(job), node, partition, gpus, start, end,
                 gpus * int((end - start).total_seconds())])


def insert_minutes(con: duckdb.DuckDBPyConnection, gpus: list[int], start: datetime,
                   end: datetime, busy: Callable[[int], float] | float, *,
                   pod: str | None = None, job: int | None = None, node: str = "n1",
                   namespace: str = "ns", skip: tuple[datetime, datetime] | None = None) -> None:
    """dcgm-exporter minutes of ``gpus`` labelled with a pod or a Slurm job, ``busy`` a value or
    a function of the minute's number; none in ``skip`` (an exporter outage)."""
    rows, t, minute = [], start, 0
    while t < end:
        value = busy(minute) if callable(busy) else busy
        if not (skip and skip[0] <= t < skip[1]):
            rows += [("c", f"GPU-{node}-{g}", node, g, t, value, namespace if pod else None, pod,
                      str(job) if job else None) for g in gpus]
        t += timedelta(minutes=1)
        minute += 1
    con.executemany("INSERT INTO gpu_utilization (cluster, gpu_uuid, node, gpu_index, "
                    "bucket_start, busy_fraction, samples, namespace, pod, hpc_job) "
                    "VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?)", rows)
