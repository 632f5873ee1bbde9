"""Reference data from the sources, with the site's files as overrides (``import-reference``).

Per cluster of the site, with no ledger connection open:

* nodes: ``scontrol -o show node`` (through the Slurm ``prefix``) and kube-state-metrics
  (``kube_node_status_capacity``, ``kube_node_labels``) through the cluster's Prometheus;
* accounts and users: ``sacctmgr -n -P show assoc format=…``;
* namespace owners: ``kube_namespace_labels`` with the site's ``namespace_labels`` keys.

Then, in one short transaction per cluster: the GPU inventory (``nodes``, as of now, and
``node_inventory``, effective-dated), the account tree (``slurm_accounts``) and the identity
candidates (``identity_candidates``, effective-dated). The nodes file overrides the sources per
node and the accounts file per account; the identity map overrides the candidates in
resolve_identity.sql. Unreadable lines go to ``rejects`` (scontrol, sacctmgr) and unusable
samples to ``k8s_rejects``, counted in the result.

Effective dating: ``models/history.py`` ``apply_history``, the one rule. Reading:
``reference_read.py``.
"""

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl

from connectors.errors import Reject, rejects_frame
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import SAMPLE_REJECT_SCHEMA
from connectors.reference_files import read_accounts, read_nodes
from connectors.slurm.commands import CommandRunner
from gpuledger.ingest import service
from gpuledger.ingest.loads import LoadResult
from gpuledger.ingest.nodenames import load_namer, record_names
from gpuledger.ingest.reference_read import (
    INVENTORY_KEY,
    KSM_METRICS,
    ClusterReference,
    inventory_rows,
    merge_sources,
    read_k8s_reference,
    read_scontrol_nodes,
    read_slurm_reference,
    with_file_override,
)
from gpuledger.site import Site
from models import schema
from models.history import HistoryChange, apply_history
from models.runner import record_ingest, replace_rows, transaction

Connect = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]
INVENTORY_ATTRS = ("gpu_count", "pool", "slurm_partition", "gpu_product", "source")
SLICE_KEY = ("cluster", "node", "sharing", "slice_profile", "source")
SLICE_ATTRS = ("units", "physical_gpus", "units_per_gpu", "gpu_slices", "mig_config")
CANDIDATE_KEY = ("source", "cluster", "source_kind", "key")
CANDIDATE_ATTRS = ("person", "team", "cost_centre", "evidence")
# --------------------------------------------------------------------------- writing


def write_inventory(con: duckdb.DuckDBPyConnection, cluster: str, gpus: pl.DataFrame,
                    at: datetime) -> HistoryChange:
    """Replace the cluster's ``nodes`` with `gpus` and bring ``node_inventory`` up to date,
    in one transaction."""
    namer = load_namer(con)
    gpus = namer.canonical_frame(gpus)
    with transaction(con):
        record_names(con, namer, "node_inventory")
        replace_rows(con, schema.NODES, gpus.select(schema.NODES.column_names),
                     where="cluster = ?", params=(cluster,), atomic=False)
        return apply_history(con, schema.NODE_INVENTORY, INVENTORY_KEY, INVENTORY_ATTRS,
                             inventory_rows(gpus), at, scope="cluster = ?", params=(cluster,))


def slice_rows(cluster: str, slices: pl.DataFrame, source: str = "ksm") -> pl.DataFrame:
    """KSM's shared-GPU rows -> the node_gpu_slices state: one row per (node, sharing,
    profile); two resources of one mode on a node (nvidia_com_gpu replicas and a renamed
    resource) add up."""
    return slices.group_by("node", "sharing", "slice_profile", maintain_order=True).agg(
        pl.col("units").sum(), pl.col("physical_gpus").max(), pl.col("units_per_gpu").max(),
        pl.col("gpu_slices").max(), pl.col("mig_config").drop_nulls().first(),
    ).with_columns(cluster=pl.lit(cluster), source=pl.lit(source))


def write_slices(con: duckdb.DuckDBPyConnection, cluster: str, slices: pl.DataFrame,
                 at: datetime, source: str = "ksm") -> HistoryChange:
    """Bring the cluster's KSM rows of ``node_gpu_slices`` up to date (inside the caller's
    transaction): a MIG layout change closes the node's rows at `at` and opens the new ones;
    the other source's rows (`source` ksm or scontrol) are left alone."""
    namer = load_namer(con)
    state = slice_rows(cluster, namer.canonical_frame(slices), source)
    return apply_history(con, schema.NODE_GPU_SLICES, SLICE_KEY, SLICE_ATTRS, state, at,
                         scope="cluster = ? AND source = ?", params=(cluster, source))


def import_nodes_file(con: duckdb.DuckDBPyConnection, path: Path, cluster: str,
                      *, at: datetime | None = None) -> LoadResult:
    """``import-nodes``: the file is the cluster's whole inventory (service.import_nodes), and
    ``node_inventory`` follows it (nodes the file no longer lists are closed)."""
    result = service.import_nodes(con, path, cluster)
    gpus = pl.from_arrow(con.execute(
        "SELECT *, '' AS gpu_product, 'nodes_file' AS source FROM nodes WHERE cluster = ?",
        [cluster]).to_arrow_table())
    with transaction(con):
        change = apply_history(con, schema.NODE_INVENTORY, INVENTORY_KEY, INVENTORY_ATTRS,
                               inventory_rows(gpus), at or _now(), scope="cluster = ?",
                               params=(cluster,))
    return LoadResult(result.source, result.rows, result.rejects,
                              (*result.warnings, _history_note(change)))


def candidate_rows(ref: ClusterReference) -> dict[str, pl.DataFrame]:
    """Identity candidates by source: slurm_assoc (a user is its own person, an account its
    team; the root account names nobody) and namespace_labels."""
    out: dict[str, pl.DataFrame] = {}
    base = {"source": pl.String, "cluster": pl.String, "source_kind": pl.String,
            "key": pl.String, "person": pl.String, "team": pl.String,
            "cost_centre": pl.String, "evidence": pl.String}
    if ref.users is not None and ref.accounts is not None:
        rows = [("slurm_assoc", ref.cluster, "slurm_user", u, u, "", "",
                 f"sacctmgr user {u}") for u in sorted(set(ref.users["user"].to_list()))]
        rows += [("slurm_assoc", ref.cluster, "slurm_account", a, "", a, "",
                  f"sacctmgr account {a}")
                 for a in sorted(set(ref.accounts["account"].to_list())) if a != "root"]
        out["slurm_assoc"] = pl.DataFrame(rows, schema=base, orient="row")
    if ref.namespace_owners is not None:
        ns = ref.namespace_owners
        out["namespace_labels"] = ns.select(
            pl.lit("namespace_labels").alias("source"), pl.lit(ref.cluster).alias("cluster"),
            pl.lit("k8s_namespace").alias("source_kind"), pl.col("namespace").alias("key"),
            "person", "team", "cost_centre", pl.col("labels").alias("evidence")).cast(base)
    return out


def merged_accounts(refs: Sequence[ClusterReference], path: Path | None,
                    rejects: list[Reject]) -> pl.DataFrame | None:
    """The account tree of every cluster's sacctmgr, the accounts file overriding per account
    (None when neither exists)."""
    frames = [r.accounts.select("account", "parent") for r in refs if r.accounts is not None]
    tree = pl.concat(frames).unique("account", keep="first", maintain_order=True) if frames \
        else None
    if path is not None:
        file_rows, file_rejects = read_accounts(path)
        rejects.extend(file_rejects)
        tree = file_rows if tree is None else pl.concat(
            [tree.filter(~pl.col("account").is_in(file_rows["account"].to_list())), file_rows])
    return tree.sort("account") if tree is not None else None


def _store_line_rejects(con: duckdb.DuckDBPyConnection, source: str, name: str,
                        rejects: list[Reject]) -> None:
    replace_rows(con, schema.REJECTS,
                 rejects_frame(rejects).with_columns(pl.lit(name).alias("source_file")),
                 where="source = ? AND source_file = ?", params=(source, name), atomic=False)


def _store_sample_rejects(con: duckdb.DuckDBPyConnection, ref: ClusterReference) -> int:
    if ref.ksm_window is None:
        return 0
    frame = (pl.concat(ref.sample_rejects) if ref.sample_rejects
             else pl.DataFrame(schema=SAMPLE_REJECT_SCHEMA))
    a, b = ref.ksm_window
    frame = frame.with_columns(cluster=pl.lit(ref.cluster), window_start=pl.lit(a),
                               window_end=pl.lit(b)).select(schema.K8S_REJECTS.column_names)
    replace_rows(con, schema.K8S_REJECTS, frame,
                 where="cluster = ? AND window_start = ? AND window_end = ? "
                 "AND list_contains(?::VARCHAR[], metric)",
                 params=(ref.cluster, a, b, list(KSM_METRICS)), atomic=False)
    return frame.height


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _history_note(change: HistoryChange) -> str:
    return f"node_inventory: {change.opened} row(s) opened, {change.closed} closed"


@dataclass(frozen=True)
class ReferenceResult:
    """What one ``import-reference`` did, per cluster and in total."""

    lines: tuple[str, ...]
    rejects: int

    def summary(self) -> str:
        return "\n".join(self.lines)


PARTS = frozenset({"nodes", "accounts", "candidates"})


def write_cluster_reference(con: duckdb.DuckDBPyConnection, ref: ClusterReference,
                            file_rows: pl.DataFrame | None, parts: frozenset[str] = PARTS
                            ) -> list[str]:
    """Write what `ref` read (and the file rows filed under its cluster); one line per part."""
    lines: list[str] = []
    node_sources = ref.slurm_nodes is not None or ref.ksm_nodes is not None
    if "nodes" in parts and (node_sources or file_rows is not None):
        gpus = with_file_override(merge_sources(ref.cluster, ref.slurm_nodes, ref.ksm_nodes),
                                  file_rows)
        change = write_inventory(con, ref.cluster, gpus, ref.observed_at)
        lines.append(f"{ref.cluster}: nodes: {gpus['node'].n_unique()} GPU node(s), "
                     f"{gpus.height} GPU(s); {_history_note(change)}")
    if "nodes" in parts and ref.ksm_slices is not None:
        with transaction(con):
            change = write_slices(con, ref.cluster, ref.ksm_slices, ref.observed_at)
        lines.append(f"{ref.cluster}: shared GPUs: {ref.ksm_slices.height} node slice row(s); "
                     f"node_gpu_slices: {change.opened} opened, {change.closed} closed")
    if "nodes" in parts and ref.slurm_slices is not None:
        with transaction(con):
            change = write_slices(con, ref.cluster, ref.slurm_slices, ref.observed_at,
                                  source="scontrol")
        if ref.slurm_slices.height or change.opened or change.closed:  # a cluster with some
            lines.append(f"{ref.cluster}: shared GPUs (scontrol): {ref.slurm_slices.height} "
                         f"node slice row(s); node_gpu_slices: {change.opened} opened, "
                         f"{change.closed} closed")
    if "nodes" in parts and ref.slinky_pods is not None and ref.slinky_pods.height:
        with transaction(con):
            write_slinky_pods(con, ref.cluster, ref.slinky_pods, ref.observed_at)
        lines.append(f"{ref.cluster}: Slinky slurmd pods named by scontrol Comment=: "
                     f"{ref.slinky_pods.height}")
    rejected = 0
    with transaction(con):
        for source, frame in (candidate_rows(ref) if "candidates" in parts else {}).items():
            change = apply_history(con, schema.IDENTITY_CANDIDATES, CANDIDATE_KEY,
                                   CANDIDATE_ATTRS, frame, ref.observed_at,
                                   scope="source = ? AND cluster = ?",
                                   params=(source, ref.cluster), first_unbounded=True)
            lines.append(f"{ref.cluster}: identity candidates ({source}): {frame.height}; "
                         f"{change.opened} opened, {change.closed} closed")
        for command, rejects in ref.line_rejects.items():
            source = rejects[0].source if rejects else (
                "scontrol_nodes" if command.startswith("scontrol") else "sacctmgr_assoc")
            _store_line_rejects(con, source, f"{ref.cluster}: {command}", rejects)
            rejected += len(rejects)
        samples = _store_sample_rejects(con, ref)
        rejected += samples
        for part, frame in (("scontrol", ref.slurm_nodes), ("ksm", ref.ksm_nodes)):
            if frame is not None:
                record_ingest(con, source=f"reference_{part}", partition_key=ref.cluster,
                              window_start=None, window_end=ref.observed_at,
                              rows_loaded=frame.height, rows_rejected=rejected, atomic=False)
    if rejected:
        lines.append(f"{ref.cluster}: {rejected} line(s)/sample(s) rejected (rejects, "
                     "k8s_rejects)")
    return lines


def write_slinky_pods(con: duckdb.DuckDBPyConnection, cluster: str, pods: pl.DataFrame,
                      at: datetime) -> None:
    """Upsert what `scontrol show node` Comment= says of Slinky slurmd pods (slurm_node_pods):
    a pair seen again keeps its first read and moves its last."""
    frame = pods.select("node", "pod_namespace", "pod_name", "k8s_node").unique(
        ["node", "pod_namespace", "pod_name"], keep="last")
    con.register("seen_slinky_pods", frame.to_arrow())
    try:
        match = ("p.cluster = ? AND p.node = s.node AND p.pod_namespace = s.pod_namespace "
                 "AND p.pod_name = s.pod_name")
        con.execute(f"UPDATE slurm_node_pods AS p SET last_seen = greatest(p.last_seen, ?), "
                    f"k8s_node = s.k8s_node FROM seen_slinky_pods AS s WHERE {match}",
                    [at, cluster])
        con.execute(f"INSERT INTO slurm_node_pods SELECT ?, s.node, s.pod_namespace, s.pod_name, "
                    f"s.k8s_node, ?, ? FROM seen_slinky_pods AS s WHERE NOT EXISTS "
                    f"(SELECT 1 FROM slurm_node_pods AS p WHERE {match})",
                    [cluster, at, at, cluster])
    finally:
        con.unregister("seen_slinky_pods")


def file_cluster(refs: Sequence[ClusterReference], file_nodes: pl.DataFrame,
                 default: str) -> dict[str, pl.DataFrame]:
    """The nodes file's rows by cluster: a node goes to the cluster whose sources list it,
    else to `default` (the site's first cluster)."""
    owner: dict[str, str] = {}
    for r in refs:
        for frame in (r.slurm_nodes, r.ksm_nodes):
            if frame is not None:
                for node in frame["node"].to_list():
                    owner.setdefault(node, r.cluster)
    tagged = file_nodes.with_columns(
        pl.col("node").replace_strict(owner, default=default, return_dtype=pl.String)
        .alias("cluster"))
    return {str(c[0]): g for c, g in tagged.group_by("cluster", maintain_order=True)}


def import_reference(site: Site, connect: Connect, *, at: datetime | None = None,
                     clusters: Sequence[str] | None = None,
                     slurm_runner: Callable[[object], CommandRunner] | None = None,
                     metrics_source: Callable[[object], MetricsSource] | None = None,
                     parts: frozenset[str] = PARTS, live_only: bool = False,
                     ) -> ReferenceResult:
    """Read every chosen cluster's sources (no ledger open), then write them and the site's
    reference files (nodes, accounts) as overrides. `at`: the observation time (default now;
    a file-mode Prometheus: its last sample). `parts`: what to write (nodes, accounts,
    candidates); `live_only`: skip OpenMetrics files (a file-mode site keeps its files)."""
    from gpuledger.site import sources as site_sources
    from gpuledger.site.days import openmetrics_last_sample

    runner_of = slurm_runner or site_sources.slurm_runner
    source_of = metrics_source or site_sources.metrics_source
    chosen = [site.cluster(n) for n in clusters] if clusters else list(site.clusters)
    refs: list[ClusterReference] = []
    for c in chosen:
        when = at
        if when is None and c.prometheus is not None and c.prometheus.openmetrics is not None:
            last = openmetrics_last_sample(c.prometheus.openmetrics)
            when = last + timedelta(seconds=1) if last is not None else None
        ref = ClusterReference(cluster=c.name, observed_at=when or _now())
        if c.slurm is not None and c.slurm.mode == "sacct":
            read_slurm_reference(ref, runner_of(c.slurm))
        elif c.slurm is not None and c.slurm.scontrol_nodes is not None:
            read_scontrol_nodes(ref, c.slurm.scontrol_nodes.read_text(encoding="utf-8"),
                                str(c.slurm.scontrol_nodes))
        if c.prometheus is not None and not (live_only and c.prometheus.openmetrics):
            read_k8s_reference(ref, source_of(c.prometheus),
                               namespace_labels=site.reference.namespace_labels,
                               lookback=timedelta(minutes=c.prometheus.lookback_minutes or 60),
                               sharing=site.sharing)
        refs.append(ref)
    ref_files = site.reference
    by_cluster: dict[str, pl.DataFrame] = {}
    node_rejects: list[Reject] = []
    if ref_files.nodes is not None and "nodes" in parts:
        file_nodes, node_rejects = read_nodes(ref_files.nodes)
        by_cluster = file_cluster(refs, file_nodes, chosen[0].name)
    account_rejects: list[Reject] = []
    tree = merged_accounts(refs, ref_files.accounts, account_rejects) \
        if "accounts" in parts else None
    lines: list[str] = []
    with connect() as con:
        for ref in refs:
            lines += write_cluster_reference(con, ref, by_cluster.get(ref.cluster), parts)
        with transaction(con):
            if tree is not None:
                replace_rows(con, schema.SLURM_ACCOUNTS, tree, atomic=False)
                lines.append(f"accounts: {tree.height} in the tree")
            for source, path, rejects in (("nodes", ref_files.nodes, node_rejects),
                                          ("slurm_accounts", ref_files.accounts,
                                           account_rejects)):
                wanted = "nodes" if source == "nodes" else "accounts"
                if path is not None and wanted in parts:
                    service.store_rejects(con, source, path, rejects, atomic=False)
                    service.register_file(con, source, path, len(rejects), atomic=False)
    total = sum(len(v) for r in refs for v in r.line_rejects.values()) + len(node_rejects) \
        + len(account_rejects) + sum(f.height for r in refs for f in r.sample_rejects)
    return ReferenceResult(tuple(lines), total)

