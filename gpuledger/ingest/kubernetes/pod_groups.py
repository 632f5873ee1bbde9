"""The scheduler's gang objects into the ledger: ``k8s_pod_groups``.

One snapshot (a kubectl List file, or a list the API answered) is one observation of a cluster:
each uid it lists gets its rows replaced by what it says, with ``first_seen``/``last_seen`` the
observations that showed it. Objects it no longer lists keep their last state -- a Job's
PodGroup is deleted with the Job, and a partial gang may be detected after that. An
observation older than what a uid already holds (files stored out of order) only widens
``first_seen``. Rejected items go to ``rejects`` (source ``k8s_pod_groups``).

The one path for the CLI (``import-pod-groups``, ``load`` with ``[kueue] pod_groups``) and the
Dagster asset ``k8s_pod_groups``.
"""

import gzip
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl

from connectors.kubernetes.kube_api import (
    ApiSettings,
    KubeApiClient,
    read_kubeconfig,
    snapshot_files,
    snapshot_time,
    stamp_name,
)
from connectors.kubernetes.pod_groups import (
    REJECT_SOURCE,
    PodGroupSnapshot,
    pod_group_frame,
    read_pod_group_items,
    read_pod_group_snapshot,
)
from connectors.kubernetes.pod_groups_api import list_pod_groups
from gpuledger.ingest.loads import LoadResult, register_file, store_rejects
from gpuledger.site import KueueSite
from models import schema
from models.runner import append_rows, record_ingest, transaction


@dataclass(frozen=True)
class GroupsRead:
    """One observation read, before the ledger is opened."""

    snapshot: PodGroupSnapshot
    observed_at: datetime
    source_file: Path | None  # None: straight from the API (nothing to register)
    missing: tuple[str, ...] = ()  # resources the API server does not serve


def observed_time(path: Path) -> datetime:
    stamp = snapshot_time(path)
    if stamp is not None:
        return stamp
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(tzinfo=None)


def read_file(path: Path, observed_at: datetime | None = None) -> GroupsRead:
    path = Path(path)
    return GroupsRead(read_pod_group_snapshot(path), observed_at or observed_time(path), path)


def read_api(kueue: KueueSite, *, spool: Path | None = None, retries: int = 3) -> GroupsRead:
    """List the cluster's Workload/PodGroup objects through its kubeconfig (no ledger here);
    with ``spool`` the List is also kept there as ``<UTC time>.json.gz`` (the fixture twin)."""
    if kueue.kubeconfig is None:
        msg = "expected [kueue] kubeconfig to list pod groups, found only snapshot files"
        raise ValueError(msg)
    creds = read_kubeconfig(kueue.kubeconfig, kueue.context)
    client = KubeApiClient(creds, ApiSettings(timeout_s=kueue.timeout_s, retries=retries))
    listing = list_pod_groups(client, kueue.namespace)
    name = f"api:{creds.server}"
    if spool is not None:
        spool.mkdir(parents=True, exist_ok=True)
        kept = spool / f"pod-groups-{stamp_name(listing.observed_at)}.json.gz"
        tmp = spool / f".{kept.name}.{os.getpid()}.tmp"
        with gzip.open(tmp, "wt", encoding="utf-8") as fh:
            json.dump(listing.document(), fh, sort_keys=True)
        tmp.replace(kept)
        name = str(kept)
    rows, rejects, listed = read_pod_group_items(listing.items, name)
    return GroupsRead(PodGroupSnapshot(pod_group_frame(rows), rejects, listed),
                      listing.observed_at, Path(name) if spool is not None else None,
                      listing.missing)


def read_snapshots(path: Path) -> list[GroupsRead]:
    """A snapshot file, or a folder of time-named ones in the order taken."""
    path = Path(path)
    if path.is_dir():
        return [read_file(p, at) for at, p in snapshot_files(path)]
    return [read_file(path)]


def store(con: duckdb.DuckDBPyConnection, read: GroupsRead, *, cluster: str = "") -> LoadResult:
    """One observation into ``k8s_pod_groups`` (and its rejects, file, ingest run): one
    transaction."""
    snap, at = read.snapshot, read.observed_at
    frame = snap.groups.with_columns(
        pl.lit(cluster).alias("cluster"),
        pl.lit(at, dtype=pl.Datetime("us")).alias("first_seen"),
        pl.lit(at, dtype=pl.Datetime("us")).alias("last_seen"),
    )
    table = schema.K8S_POD_GROUPS.name
    uids = sorted(set(frame["uid"].to_list()))
    with transaction(con):
        held = dict(con.execute(
            f"SELECT uid, max(last_seen) FROM {table} WHERE cluster = ? "
            "AND list_contains(?::VARCHAR[], uid) GROUP BY uid", [cluster, uids]).fetchall())
        newer = [u for u, last in held.items() if last > at]  # this file is the older one
        con.execute(f"UPDATE {table} SET first_seen = least(first_seen, ?) WHERE cluster = ? "
                    "AND list_contains(?::VARCHAR[], uid)", [at, cluster, newer])
        first = dict(con.execute(
            f"SELECT uid, min(first_seen) FROM {table} WHERE cluster = ? "
            "AND list_contains(?::VARCHAR[], uid) GROUP BY uid", [cluster, uids]).fetchall())
        fresh = frame.filter(~pl.col("uid").is_in(newer)).with_columns(
            pl.col("uid").replace_strict(first, default=None, return_dtype=pl.Datetime("us"))
            .fill_null(at).alias("first_seen"))
        replaced = sorted(set(fresh["uid"].to_list()))
        con.execute(f"DELETE FROM {table} WHERE cluster = ? AND list_contains(?::VARCHAR[], uid)",
                    [cluster, replaced])
        append_rows(con, schema.K8S_POD_GROUPS, fresh)
        if read.source_file is not None and read.source_file.exists():
            store_rejects(con, REJECT_SOURCE, read.source_file, snap.rejects, atomic=False)
            register_file(con, REJECT_SOURCE, read.source_file, snap.listed, atomic=False)
        record_ingest(con, source=REJECT_SOURCE,
                      partition_key=str(read.source_file or f"api@{at:%Y-%m-%dT%H:%M:%S}"),
                      window_start=at, window_end=at, rows_loaded=frame.height,
                      rows_rejected=len(snap.rejects), atomic=False,
                      detail=f"cluster={cluster} uids={len(uids)}"
                      + (f" not served: {', '.join(read.missing)}" if read.missing else ""))
    return LoadResult(REJECT_SOURCE, frame.height, tuple(snap.rejects),
                      tuple(f"the API server does not serve {m}" for m in read.missing))


def import_pod_groups(con: duckdb.DuckDBPyConnection, path: Path, *,
                      cluster: str = "") -> LoadResult:
    """A snapshot file (or a folder of them, in time order) into ``k8s_pod_groups``."""
    results = [store(con, read, cluster=cluster) for read in read_snapshots(Path(path))]
    return LoadResult(REJECT_SOURCE, sum(r.rows for r in results),
                      tuple(x for r in results for x in r.rejects),
                      tuple(dict.fromkeys(w for r in results for w in r.warnings)))
