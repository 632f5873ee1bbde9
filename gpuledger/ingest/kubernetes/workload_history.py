"""Kueue Workload history: every state of every Workload any snapshot showed, kept.

Kueue deletes a Workload with its Job (``ttlSecondsAfterFinished``), so the one snapshot a day
``import-workloads`` used to replace ``kueue_workloads`` with forgot most finished gangs. Now
each snapshot is one *observation* at a time:

* ``kueue_workload_history`` gets one row per cluster, uid and distinct object (its SHA-256;
  the object includes ``metadata.resourceVersion``, which changes with every write), with the
  first and last observation that showed it. A uid that an observation of its cluster (and
  namespace, for a namespaced list) no longer lists gets ``deleted_seen_at`` = that time.
  Storing a snapshot again changes nothing; snapshots may arrive out of order.
* ``kueue_workloads`` / ``kueue_workloads_raw`` (what the detectors read) are then the latest
  state of every uid the observation listed; deleted Workloads keep their last state there.

The Dagster sensor (``pipelines/defs/kueue/sensors.py``) lists Workloads through the API with no
ledger connection open and spools each list as a compressed file (``write_spool``); the ingest
asset stores the spooled files in time order (``ingest_spool``) and archives each after commit.
"""

import gzip
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl

from connectors.kubernetes.kube_api import (
    ApiSettings,
    KubeApiClient,
    WorkloadList,
    read_kubeconfig,
    snapshot_files,
    snapshot_time,
    stamp_name,
)
from connectors.kubernetes.workload_conditions import (
    DEFAULT_GPU_RESOURCES,
    workload_frame,
    workload_row,
)
from connectors.kubernetes.workload_snapshot import (
    REJECT_SOURCE,
    WORKLOAD_SCHEMA,
    WorkloadSnapshot,
    read_workload_snapshot,
)
from gpuledger.ingest.loads import LoadResult, register_file, store_rejects
from gpuledger.site import KueueSite
from models import schema
from models.runner import record_ingest, replace_rows, transaction

ARCHIVE = "done"  # spooled files go here once their observation is committed


@dataclass(frozen=True)
class Observation:
    """What storing one snapshot changed in the history."""

    cluster: str
    observed_at: datetime
    listed: int  # Workloads the snapshot listed (read or rejected)
    new_states: int  # history rows added (a new Workload or a changed one)
    deleted: int  # uids newly marked deleted_seen_at


def observed_time(path: Path) -> datetime:
    """When a snapshot file was taken: the UTC time in its name, else its modification time."""
    stamp = snapshot_time(path)
    if stamp is not None:
        return stamp
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(tzinfo=None)


def _listed_uids(snap: WorkloadSnapshot) -> list[str]:
    """Every uid the List held, rejected items too: a bad item was not deleted."""
    uids = list(snap.raw["uid"])
    for r in snap.rejects:
        try:
            uid = json.loads(r.raw).get("metadata", {}).get("uid")
        except (ValueError, AttributeError):
            continue
        if isinstance(uid, str) and uid:
            uids.append(uid)
    return sorted(set(uids))


def _history_frame(snap: WorkloadSnapshot, cluster: str, at: datetime,
                   source_file: str) -> pl.DataFrame:
    return snap.raw.select(
        pl.lit(cluster).alias("cluster"), "uid", "namespace", "name",
        pl.col("object_json").str.json_path_match("$.metadata.resourceVersion")
        .fill_null("").alias("resource_version"),
        pl.col("object_json").map_elements(
            lambda s: hashlib.sha256(s.encode()).hexdigest(), return_dtype=pl.String,
        ).alias("content_sha256"),
        pl.lit(at, dtype=pl.Datetime("us")).alias("first_seen"),
        pl.lit(at, dtype=pl.Datetime("us")).alias("last_seen"),
        pl.lit(None, dtype=pl.Datetime("us")).alias("deleted_seen_at"),
        "object_json",
        pl.lit(source_file).alias("source_file"),
    )


def observe(con: duckdb.DuckDBPyConnection, snap: WorkloadSnapshot, *, cluster: str,
            observed_at: datetime, source_file: str, namespace: str = "",
            gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES) -> Observation:
    """Store one observation in the history and refresh ``kueue_workloads`` from it.

    Joins the caller's transaction. ``namespace``: the list covered only that namespace, so
    only its Workloads can be seen deleted.
    """
    frame = _history_frame(snap, cluster, observed_at, source_file)
    listed = _listed_uids(snap)
    h = schema.KUEUE_WORKLOAD_HISTORY.name
    before = con.execute(f"SELECT count(*) FROM {h}").fetchone()[0]
    view = f"_observed_{os.getpid()}_{id(frame)}"
    con.register(view, frame.to_arrow())
    try:
        con.execute(f"""
            UPDATE {h} AS x
            SET first_seen = least(x.first_seen, ?), last_seen = greatest(x.last_seen, ?)
            FROM {view} AS o
            WHERE x.cluster = o.cluster AND x.uid = o.uid
              AND x.content_sha256 = o.content_sha256""", [observed_at, observed_at])
        con.execute(f"""
            INSERT INTO {h} BY NAME
            SELECT * FROM {view} AS o ANTI JOIN {h} AS x
              ON x.cluster = o.cluster AND x.uid = o.uid AND x.content_sha256 = o.content_sha256
            """)
    finally:
        con.unregister(view)
    added = con.execute(f"SELECT count(*) FROM {h}").fetchone()[0] - before
    # listed again at or after a deletion seen earlier (an out-of-order file): not deleted
    con.execute(f"UPDATE {h} SET deleted_seen_at = NULL WHERE cluster = ? AND "
                "list_contains(?::VARCHAR[], uid) AND deleted_seen_at <= ?",
                [cluster, listed, observed_at])
    # gone: last seen before this observation and not listed by it (the earliest such time)
    deleted = con.execute(f"""
        UPDATE {h} SET deleted_seen_at = ?
        WHERE cluster = ? AND (? = '' OR namespace = ?)
          AND NOT list_contains(?::VARCHAR[], uid)
          AND (deleted_seen_at IS NULL OR deleted_seen_at > ?)
          AND uid IN (SELECT uid FROM {h} WHERE cluster = ? GROUP BY uid
                      HAVING max(last_seen) < ?)
        RETURNING uid""", [observed_at, cluster, namespace, namespace, listed, observed_at,
                           cluster, observed_at]).fetchall()
    _refresh_current(con, snap, frame, cluster, gpu_resources)
    return Observation(cluster, observed_at, len(listed), added, len({u for (u,) in deleted}))


def _refresh_current(con: duckdb.DuckDBPyConnection, snap: WorkloadSnapshot,
                     frame: pl.DataFrame, cluster: str,
                     gpu_resources: Sequence[str]) -> None:
    """``kueue_workloads`` and ``_raw`` := the latest state of each uid the snapshot read."""
    uids = snap.raw["uid"].to_list()
    if not uids:
        return
    latest = con.execute(f"""
        SELECT uid, object_json, source_file, content_sha256
        FROM {schema.KUEUE_WORKLOAD_HISTORY.name}
        WHERE cluster = ? AND list_contains(?::VARCHAR[], uid)
        QUALIFY row_number() OVER (PARTITION BY uid ORDER BY last_seen DESC, first_seen DESC)
            = 1""", [cluster, uids]).fetchall()
    mine = dict(zip(frame["uid"], frame["content_sha256"], strict=True))
    older = [(uid, text, file) for uid, text, file, sha in latest if sha != mine[uid]]
    latest = [(uid, text, file) for uid, text, file, _ in latest]
    # the file a state was first seen in, as in the history (the same, re-read in any order)
    first_file = pl.DataFrame({"uid": [u for u, _, _ in latest],
                               "first_file": [f for _, _, f in latest]},
                              schema={"uid": pl.String, "first_file": pl.String})

    def traced(frame: pl.DataFrame) -> pl.DataFrame:
        return (frame.join(first_file, on="uid", how="left")
                .with_columns(pl.coalesce("first_file", "source_file").alias("source_file"))
                .drop("first_file"))

    raw, rows = traced(snap.raw), traced(snap.workloads)
    if older:  # this file is older than what the history holds for these uids (out of order)
        stale = [u for u, _, _ in older]
        parsed = [workload_row(json.loads(text), file, tuple(gpu_resources))
                  for _, text, file in older]
        raw = pl.concat([raw.filter(~pl.col("uid").is_in(stale)), pl.DataFrame([
            {"uid": r["uid"], "namespace": r["namespace"], "name": r["name"],
             "queue_name": r["queue_name"] or "", "cluster_queue": r["cluster_queue"] or "",
             "created_at": r["created_at"], "pod_sets": r["pod_sets"],
             "pods_wanted": r["pods_wanted"], "object_json": text, "source_file": file}
            for r, (_, text, file) in zip(parsed, older, strict=True)], schema=WORKLOAD_SCHEMA)])
        rows = pl.concat([rows.filter(~pl.col("uid").is_in(stale)), workload_frame(parsed)])
    by_uid = "list_contains(?::VARCHAR[], uid)"
    replace_rows(con, schema.KUEUE_WORKLOADS_RAW, raw, where=by_uid, params=(uids,),
                 atomic=False)
    replace_rows(con, schema.KUEUE_WORKLOADS, rows, where=by_uid, params=(uids,), atomic=False)


def store_snapshot(
    con: duckdb.DuckDBPyConnection, path: Path, snap: WorkloadSnapshot, *, cluster: str = "",
    observed_at: datetime | None = None, namespace: str = "",
    gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
) -> tuple[LoadResult, Observation]:
    """One snapshot file already read (``snap``) into the ledger, in one transaction: the
    history, the current tables, its rejects, ``source_files`` and ``ingest_runs``."""
    path = Path(path)
    at = observed_at or observed_time(path)
    name = str(path)
    if snap.raw.height and snap.raw["source_file"][0] != name:  # read under another name
        snap = WorkloadSnapshot(snap.raw.with_columns(pl.lit(name).alias("source_file")),
                                snap.workloads.with_columns(pl.lit(name).alias("source_file")),
                                [replace(r, source_file=name) for r in snap.rejects])
    listed = snap.raw.height + len(snap.rejects)
    with transaction(con):
        seen = observe(con, snap, cluster=cluster, observed_at=at, source_file=name,
                       namespace=namespace, gpu_resources=gpu_resources)
        # rejects of this file from before the two tables were filled by one read
        con.execute("DELETE FROM rejects WHERE source = 'kueue_workload_conditions' "
                    "AND source_file = ?", [name])
        store_rejects(con, REJECT_SOURCE, path, snap.rejects, atomic=False)
        register_file(con, REJECT_SOURCE, path, listed, atomic=False)
        record_ingest(con, source=REJECT_SOURCE, partition_key=name, window_start=at,
                      window_end=at, rows_loaded=snap.raw.height,
                      rows_rejected=len(snap.rejects), atomic=False,
                      detail=f"cluster={cluster} new_states={seen.new_states} "
                      f"deleted={seen.deleted}")
    return LoadResult(REJECT_SOURCE, snap.raw.height, tuple(snap.rejects)), seen


def import_snapshot(
    con: duckdb.DuckDBPyConnection, path: Path, *, cluster: str = "",
    observed_at: datetime | None = None, namespace: str = "",
    gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
) -> LoadResult:
    """Read a snapshot file and store it as one observation (``service.import_workloads``)."""
    snap = read_workload_snapshot(Path(path), gpu_resources=gpu_resources)
    result, _ = store_snapshot(con, path, snap, cluster=cluster, observed_at=observed_at,
                               namespace=namespace, gpu_resources=gpu_resources)
    return result


# ------------------------------------------------------------------------------------ spool


def spool_folder(db: Path, cluster: str) -> Path:
    """Where the sensor leaves a cluster's snapshots: next to the ledger."""
    return Path(db).parent / "spool" / "kueue" / cluster


def write_spool(listing: WorkloadList, folder: Path) -> Path:
    """Write a list as ``<folder>/<UTC time>.json.gz``; atomic (rename of a hidden file)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stamp_name(listing.observed_at)}.json.gz"
    tmp = folder / f".{path.name}.{os.getpid()}.tmp"
    with gzip.open(tmp, "wt", encoding="utf-8") as fh:
        json.dump(listing.document(), fh, sort_keys=True)
    tmp.replace(path)
    return path


def snapshot_to_spool(kueue: KueueSite, folder: Path, *, retries: int = 3) -> Path:
    """List the cluster's Workloads through its kubeconfig and spool them (no ledger here)."""
    if kueue.kubeconfig is None:
        msg = "expected [kueue] kubeconfig for an API snapshot, found only a snapshot file"
        raise ValueError(msg)
    creds = read_kubeconfig(kueue.kubeconfig, kueue.context)
    client = KubeApiClient(creds, ApiSettings(timeout_s=kueue.timeout_s, retries=retries))
    return write_spool(client.list_workloads(kueue.namespace), folder)


def ingest_spool(
    connect: Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]],
    folder: Path, *, cluster: str, namespace: str = "",
    gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES, archive: bool = True,
) -> list[tuple[LoadResult, Observation]]:
    """Store every spooled snapshot of ``folder`` in time order, one short transaction each.

    Each file is read before the ledger is opened and recorded under its archived name
    (``<folder>/done/``); the spooled copy is removed after commit, so a crash in between
    stores the same file again (which changes nothing).
    """
    done = []
    for at, path in snapshot_files(folder):
        snap = read_workload_snapshot(path, gpu_resources=gpu_resources)
        kept = path
        if archive:
            kept = folder / ARCHIVE / path.name
            kept.parent.mkdir(exist_ok=True)
            shutil.copy2(path, kept)
        with connect() as con:
            done.append(store_snapshot(con, kept, snap, cluster=cluster, observed_at=at,
                                       namespace=namespace, gpu_resources=gpu_resources))
        if archive:
            path.unlink()
    return done
