"""DRA in the Kubernetes ingest (docs/kubernetes.md, "DRA"): the ResourceClaims a window is
read with, their storage, and the warning about busy GPUs nobody holds.

* ``DraInput`` is what :func:`gpuledger.ingest.kubernetes.window_read.read_kubernetes_window` gets:
the site's
  GPU drivers and device classes, every claim known (stored in the ledger and read now) and the
  claims read now (stored with the window). ``DraSetup`` builds one per window for an ingest
  command: the claims it read once (the API or a snapshot, ``read_fresh``) plus the stored
  ones (``stored_claims``, a short read of the ledger).
* Claims are kept as observations: ``k8s_resource_claim_devices`` (one row per claim and
  allocated device) and ``k8s_resource_claim_pods`` (one row per claim and pod), each with the
  ``[first_seen, last_seen]`` of the observations that showed it (``store_claims``): a claim
  deleted with its pod is still known to the windows ingested later.
* ``busy_gpu_warnings``: dcgm-exporter readings that show a GPU busy while no pod (and no Slurm
  ``hpc_job``) holds it get a warning per node with the GPUs, the GPU-hours and the likely
  cause; ``fix_no_pod_note`` keeps kube-state-metrics' "no pod holds GPUs there" only where no
  GPU was busy and no DRA pod held one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl

from connectors.errors import Reject
from connectors.kubernetes.dra_api import list_resource_claims
from connectors.kubernetes.dra_claims import (
    CLAIM_DEVICE_SCHEMA,
    CLAIM_POD_SCHEMA,
    DEFAULT_DRA_NAMES,
    REJECT_SOURCE,
    ClaimRead,
    DraNames,
    read_claim_document,
    read_claim_file,
)
from connectors.kubernetes.dra_slices import SLICE_DEVICE_SCHEMA
from connectors.kubernetes.kube_api import (
    ApiSettings,
    KubeApiClient,
    read_kubeconfig,
    snapshot_files,
    snapshot_time,
)
from models import schema

#: claims last seen this long before a window are not read with it
CLAIM_HORIZON = timedelta(days=31)
_NO_POD_NOTE = "; no pod holds GPUs there"
#: nodes named one by one in the busy-GPU warning (the most GPU-hours first); the others are
#: counted in one warning per cause
MAX_NODE_WARNINGS = 20
CAUSES = (
    "DRA claims not read (the readings name ResourceClaims, or the node has some): give the "
    "cluster's [dra] a kubeconfig or a kubectl snapshot of resourceclaims",
    "exporter without pod mapping (no reading of the node names a pod): run dcgm-exporter with "
    "--kubernetes and the kubelet's pod-resources socket, and --kubernetes-enable-dra for DRA "
    "GPUs",
    "work outside both schedulers (a process on the node neither a pod nor a Slurm job holds)",
)


@dataclass
class DraInput:
    """The DRA part of one window's read."""

    names: DraNames = DEFAULT_DRA_NAMES
    claims: ClaimRead = field(default_factory=ClaimRead)  # every claim known
    fresh: ClaimRead = field(default_factory=ClaimRead)  # read now: stored with the window


@dataclass
class DraSetup:
    """What an ingest command knows of DRA: the site's names and the claims it read."""

    names: DraNames = DEFAULT_DRA_NAMES
    fresh: ClaimRead = field(default_factory=ClaimRead)

    def window_input(self, con: duckdb.DuckDBPyConnection | None, cluster: str,
                     start: datetime) -> DraInput:
        stored = stored_claims(con, cluster, start) if con is not None else ClaimRead()
        return DraInput(self.names, stored + self.fresh, self.fresh)

    def opened_input(self, opened: Callable[[], AbstractContextManager], cluster: str,
                     start: datetime) -> DraInput:
        """``window_input`` with a ledger opened for the read only."""
        with opened() as con:
            return self.window_input(con, cluster, start)


# --------------------------------------------------------------------------- sources


def read_fresh(*, kubeconfig: Path | None = None, context: str = "", namespace: str = "",
               timeout_s: float = 30.0, snapshot: Path | None = None,
               now: datetime | None = None) -> ClaimRead:
    """The claims of a cluster's ``[dra]`` source: the API now (kubeconfig), else a snapshot
    file (its modification time, or the UTC time in its name) or a folder of time-named ones."""
    if kubeconfig is not None:
        client = KubeApiClient(read_kubeconfig(kubeconfig, context),
                               ApiSettings(timeout_s=timeout_s))
        listed = list_resource_claims(client, namespace)
        source = f"{client.creds.server} {listed.api_version}"
        read = read_claim_document(listed.document(), observed_at=listed.observed_at,
                                   source=source)
        if listed.slices_refused:  # kept and counted like any input we could not read
            read.rejects.append(Reject(REJECT_SOURCE, source, 0, "resourceslices",
                                       listed.slices_refused, ""))
        return read
    if snapshot is None:
        return ClaimRead()
    if snapshot.is_dir():
        out = ClaimRead()
        for at, path in snapshot_files(snapshot):
            out = out + read_claim_file(path, at)
        return out
    at = snapshot_time(snapshot) or now or datetime.fromtimestamp(
        snapshot.stat().st_mtime, UTC).replace(tzinfo=None)
    return read_claim_file(snapshot, at)


# --------------------------------------------------------------------------- storage


def _seen(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(first_seen=pl.col("observed_at"),
                              last_seen=pl.col("observed_at")).drop("observed_at")


def store_claims(con: duckdb.DuckDBPyConnection, claims: ClaimRead, cluster: str) -> None:
    """Keep the claims' observations (widening each row's seen span; idempotent), and their
    unreadable items in ``rejects``; inside the caller's transaction."""
    from connectors.errors import rejects_frame
    from gpuledger.ingest.kubernetes.window_store import store_seen
    from models.runner import replace_rows

    store_seen(con, schema.K8S_RESOURCE_CLAIM_DEVICES, _seen(claims.devices), cluster)
    store_seen(con, schema.K8S_RESOURCE_CLAIM_PODS,
               _seen(claims.pods.with_columns(pl.col("claim_uid").fill_null(""))), cluster)
    store_seen(con, schema.K8S_RESOURCE_SLICE_DEVICES,
               _seen(claims.slices), cluster)
    for source in sorted({r.source_file for r in claims.rejects}):
        replace_rows(con, schema.REJECTS,
                     rejects_frame([r for r in claims.rejects if r.source_file == source]),
                     where="source = 'resource_claims' AND source_file = ?", params=(source,),
                     atomic=False)


def stored_claims(con: duckdb.DuckDBPyConnection, cluster: str,
                  start: datetime) -> ClaimRead:
    """The claims the ledger keeps for `cluster` that were seen at most ``CLAIM_HORIZON``
    before `start` (observed at their first sighting)."""
    since = start - CLAIM_HORIZON
    devices = con.execute(
        f"SELECT * EXCLUDE (cluster, last_seen) RENAME (first_seen AS observed_at) "
        f"FROM {schema.K8S_RESOURCE_CLAIM_DEVICES.name} WHERE cluster = ? AND last_seen >= ?",
        [cluster, since]).pl()
    pods = con.execute(
        f"SELECT * EXCLUDE (cluster, last_seen) RENAME (first_seen AS observed_at) "
        f"FROM {schema.K8S_RESOURCE_CLAIM_PODS.name} WHERE cluster = ? AND last_seen >= ?",
        [cluster, since]).pl()
    pods = pods.with_columns(claim_uid=pl.when(pl.col("claim_uid") != "")
                             .then(pl.col("claim_uid")))
    slices = con.execute(
        f"SELECT * EXCLUDE (cluster, first_seen) RENAME (last_seen AS observed_at) "
        f"FROM {schema.K8S_RESOURCE_SLICE_DEVICES.name} WHERE cluster = ? AND last_seen >= ?",
        [cluster, since]).pl()
    return ClaimRead(devices.select([pl.col(c).cast(t) for c, t in CLAIM_DEVICE_SCHEMA.items()]),
                     pods.select([pl.col(c).cast(t) for c, t in CLAIM_POD_SCHEMA.items()]),
                     slices=slices.select([pl.col(c).cast(t)
                                           for c, t in SLICE_DEVICE_SCHEMA.items()]))


# --------------------------------------------------------------------------- warnings


def _held_units(pods: pl.DataFrame) -> pl.DataFrame:
    """node, start_ts, end_ts, units: devices a pod interval holds (whole GPUs, MIG
    instances, replicas: an upper bound of the GPUs it keeps busy)."""
    return pods.filter(pl.col("node").is_not_null()).select(
        "node", "start_ts", "end_ts", pl.col("gpus").cast(pl.Int64).alias("units"))


def _unheld(part: pl.DataFrame, pods: pl.DataFrame, start: datetime,
            end: datetime) -> tuple[pl.DataFrame, set[str], bool]:
    """Busy readings of `part` no pod or Slurm job holds (node, gpu_uuid, bucket_start,
    dra_claim_name), the nodes with pod-labelled readings, and whether any GPU was busy."""
    minute = timedelta(minutes=1)
    rows = part.filter(pl.col("bucket_start").is_between(start, end, closed="left"))
    labelled = pl.col("pod").is_not_null() & pl.col("namespace").is_not_null()
    named = set(rows.filter(labelled)["node"].drop_nulls().unique().to_list())
    busy = rows.filter((pl.col("busy_fraction") > 0) & pl.col("hpc_job").is_null())
    any_busy = rows.filter(pl.col("busy_fraction") > 0).height > 0
    if busy.height == 0:
        return pl.DataFrame(), named, any_busy
    claim = "dra_claim_name" if "dra_claim_name" in busy.columns else None
    cols = ["node", "gpu_uuid", "gpu_instance", "bucket_start",
            *([claim] if claim else [])]
    # pod-labelled readings of a pod that holds nothing then
    with_pod = busy.filter(labelled).with_row_index("_r")
    intervals = pods.select("namespace", "pod", "start_ts", "end_ts")
    held = with_pod.join(intervals, on=["namespace", "pod"]).filter(
        (pl.col("start_ts") < pl.col("bucket_start") + minute)
        & (pl.col("end_ts") > pl.col("bucket_start")))
    orphan = with_pod.join(held.select("_r").unique(), on="_r", how="anti").select(cols)
    # unlabelled readings beyond the GPUs held on the node but not read with a pod label
    bare = busy.filter(~labelled)
    out = [orphan]
    if bare.height:
        count = bare.group_by("node", "bucket_start").agg(
            pl.struct("gpu_uuid", "gpu_instance").n_unique().alias("_busy"))
        seen = rows.filter(labelled).group_by("node", "bucket_start").agg(
            pl.struct("gpu_uuid", "gpu_instance").n_unique().alias("_labelled"))
        units = count.join(_held_units(pods), on="node").filter(
            (pl.col("start_ts") < pl.col("bucket_start") + minute)
            & (pl.col("end_ts") > pl.col("bucket_start"))
        ).group_by("node", "bucket_start").agg(pl.col("units").sum().alias("_held"))
        over = (count.join(units, on=["node", "bucket_start"], how="left")
                .join(seen, on=["node", "bucket_start"], how="left")
                .with_columns(_free=pl.max_horizontal(
                    pl.col("_held").fill_null(0) - pl.col("_labelled").fill_null(0), 0))
                .with_columns(_unheld=pl.col("_busy") - pl.col("_free"))
                .filter(pl.col("_unheld") > 0))
        if over.height:
            ranked = bare.join(over.select("node", "bucket_start", "_unheld"),
                               on=["node", "bucket_start"]).sort("gpu_uuid", "gpu_instance")
            ranked = ranked.with_columns(_n=pl.int_range(pl.len()).over("node",
                                                                         "bucket_start"))
            out.append(ranked.filter(pl.col("_n") < pl.col("_unheld")).select(cols))
    return pl.concat(out, how="vertical_relaxed"), named, any_busy


def busy_gpu_warnings(pods: pl.DataFrame, parts: Iterable[pl.DataFrame], start: datetime,
                      end: datetime, claim_nodes: set[str]) -> tuple[list[str], bool]:
    """One warning per node whose GPUs dcgm-exporter shows busy while no pod (and no Slurm
    ``hpc_job``) holds them in ``[start, end)``, with the likely cause; and whether any GPU was
    busy at all. `parts`: the window's utilization rows (spilled parts one at a time)."""
    found, named, any_busy = [], set(), False
    for part in parts:
        rows, node_named, busy = _unheld(part, pods, start, end)
        named |= node_named
        any_busy = any_busy or busy
        if rows.height:
            found.append(rows)
    if not found:
        return [], any_busy
    rows = pl.concat(found, how="diagonal_relaxed")
    dra = pl.col("dra_claim_name").is_not_null() if "dra_claim_name" in rows.columns \
        else pl.lit(False)
    per_node = rows.group_by("node").agg(
        pl.col("gpu_uuid").drop_nulls().unique().sort().alias("gpus"),
        pl.len().alias("minutes"), dra.any().alias("dra"))
    out, rest = [], {}
    for node, gpus, minutes, dra_named in per_node.sort("minutes", "node", descending=[
            True, False], nulls_last=True).iter_rows():
        if dra_named or node in claim_nodes:
            cause = CAUSES[0]
        elif node not in named:
            cause = CAUSES[1]
        else:
            cause = CAUSES[2]
        if len(out) < MAX_NODE_WARNINGS:
            out.append(f"dcgm-exporter: GPUs busy that no pod or Slurm job holds on node "
                       f"{node}: {len(gpus)} GPU(s) (e.g. {gpus[:3]}), {minutes / 60:.2f} "
                       f"GPU-hours of busy readings; likely cause: {cause}")
        else:  # the other nodes, per cause
            n, g, m = rest.get(cause, (0, 0, 0))
            rest[cause] = (n + 1, g + len(gpus), m + minutes)
    for cause, (n, g, m) in rest.items():
        out.append(f"dcgm-exporter: GPUs busy that no pod or Slurm job holds on {n} more "
                   f"node(s): {g} GPU(s), {m / 60:.2f} GPU-hours of busy readings; likely "
                   f"cause: {cause}")
    return out, any_busy


def fix_no_pod_note(warnings: list[tuple[str, str]], dra_pods: int,
                    any_busy: bool) -> list[tuple[str, str]]:
    """kube-state-metrics' "no pod holds GPUs there" only where that is so."""
    if not dra_pods and not any_busy:
        return warnings
    why = (f"; no pod requests GPUs as a resource there ({dra_pods} pod(s) hold GPUs "
           "through ResourceClaims)" if dra_pods else
           "; no pod requests GPUs there, yet dcgm-exporter shows GPUs busy (see the busy-GPU "
           "warning)")
    return [(c, m.replace(_NO_POD_NOTE, why) if c == "ksm" else m) for c, m in warnings]
