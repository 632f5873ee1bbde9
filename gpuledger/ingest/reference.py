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

Effective dating (``apply_history``): the open rows (``valid_to IS NULL``) of a scope are
compared with what the sources say now; a key whose attributes changed, or which is gone, is
closed at the observation time and the new state opened from it. A re-read with nothing changed
writes nothing.
"""

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl

from connectors.errors import Reject, rejects_frame
from connectors.gpu_sharing import DEFAULT_NAMES, SharingNames
from connectors.kubernetes.ksm_namespaces import ksm_namespace_owners
from connectors.kubernetes.ksm_nodes import KSM_NODE_SCHEMA, ksm_node_inventory
from connectors.kubernetes.ksm_slices import ksm_node_slices
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import SAMPLE_REJECT_SCHEMA
from connectors.reference_files import read_accounts, read_nodes
from connectors.slurm.commands import CommandRunner
from connectors.slurm.sacctmgr import SACCTMGR_ASSOC_COMMAND, parse_sacctmgr_assoc
from connectors.slurm.scontrol_nodes import (
    NODE_SCHEMA,
    SCONTROL_NODES_COMMAND,
    node_slices,
    parse_scontrol_nodes,
    slinky_node_pods,
)
from gpuledger.ingest import service
from gpuledger.ingest.loads import LoadResult
from gpuledger.ingest.nodenames import load_namer, record_names
from gpuledger.site import Site
from models import schema
from models.runner import record_ingest, replace_rows, transaction

Connect = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]
INVENTORY_KEY = ("cluster", "node", "gpu_model")
INVENTORY_ATTRS = ("gpu_count", "pool", "slurm_partition", "gpu_product", "source")
SLICE_KEY = ("cluster", "node", "sharing", "slice_profile", "source")
SLICE_ATTRS = ("units", "physical_gpus", "units_per_gpu", "gpu_slices", "mig_config")
CANDIDATE_KEY = ("source", "cluster", "source_kind", "key")
CANDIDATE_ATTRS = ("person", "team", "cost_centre", "evidence")
KSM_METRICS = ("kube_node_status_capacity", "kube_node_labels", "kube_namespace_labels")


@dataclass
class ClusterReference:
    """What one cluster's sources said at ``observed_at`` (None: that source is not set up)."""

    cluster: str
    observed_at: datetime
    slurm_nodes: pl.DataFrame | None = None
    ksm_nodes: pl.DataFrame | None = None
    ksm_slices: pl.DataFrame | None = None  # shared GPUs per node (ksm_slices.py)
    slurm_slices: pl.DataFrame | None = None  # shared GPUs per node (scontrol Gres=)
    slinky_pods: pl.DataFrame | None = None  # Slurm nodes that are slurmd pods (Comment=)
    accounts: pl.DataFrame | None = None
    users: pl.DataFrame | None = None
    namespace_owners: pl.DataFrame | None = None
    line_rejects: dict[str, list[Reject]] = field(default_factory=dict)  # command -> rejects
    sample_rejects: list[pl.DataFrame] = field(default_factory=list)
    ksm_window: tuple[datetime, datetime] | None = None


# --------------------------------------------------------------------------- reading


def read_slurm_reference(ref: ClusterReference, runner: CommandRunner) -> None:
    """Run ``scontrol -o show node`` and ``sacctmgr show assoc`` into `ref`."""
    shown = " ".join(SCONTROL_NODES_COMMAND)
    read_scontrol_nodes(ref, runner.run(SCONTROL_NODES_COMMAND, {}), shown)
    shown = " ".join(SACCTMGR_ASSOC_COMMAND)
    accounts, users, rejects = parse_sacctmgr_assoc(runner.run(SACCTMGR_ASSOC_COMMAND, {}),
                                                    source_file=f"{ref.cluster}: {shown}")
    ref.accounts, ref.users, ref.line_rejects[shown] = accounts, users, rejects


def read_scontrol_nodes(ref: ClusterReference, text: str, shown: str) -> None:
    """``scontrol -o show node`` output (a live run's, or a dump-mode site's file) into `ref`:
    GPUs per node, shared-GPU layouts and the Slinky slurmd pods its Comment= names."""
    nodes, rejects = parse_scontrol_nodes(text, source_file=f"{ref.cluster}: {shown}")
    ref.slurm_nodes, ref.line_rejects[shown] = nodes, rejects
    ref.slurm_slices = node_slices(nodes)
    ref.slinky_pods = slinky_node_pods(text)


def read_k8s_reference(ref: ClusterReference, source: MetricsSource, *,
                       namespace_labels: dict[str, str], lookback: timedelta,
                       sharing: SharingNames = DEFAULT_NAMES) -> None:
    """Read the KSM node inventory, shared GPUs and namespace owners as of
    ``ref.observed_at`` into `ref`."""
    ref.ksm_nodes = ksm_node_inventory(source, ref.observed_at, lookback=lookback,
                                       rejects=ref.sample_rejects)
    ref.ksm_slices = ksm_node_slices(source, ref.observed_at, lookback=lookback, names=sharing,
                                     rejects=ref.sample_rejects)
    ref.namespace_owners = ksm_namespace_owners(source, ref.observed_at, namespace_labels,
                                                lookback=lookback, rejects=ref.sample_rejects)
    ref.ksm_window = (ref.observed_at - lookback, ref.observed_at)


# --------------------------------------------------------------------------- merging


GPU_ROW_SCHEMA = {**dict.fromkeys(("cluster", "node", "pool", "gpu_model"), pl.String),
                  "gpu_count": pl.Int32, "gpu_index": pl.Int32, "gpu_uuid": pl.String,
                  "slurm_partition": pl.String, "gpu_product": pl.String, "source": pl.String}


def merge_sources(cluster: str, slurm: pl.DataFrame | None, ksm: pl.DataFrame | None
                  ) -> pl.DataFrame:
    """One row per GPU (``GPU_ROW_SCHEMA``) from what scontrol and KSM say.

    A node Slurm lists is counted as Slurm says (its GRES types); a node both list is ``shared``,
    one only KSM lists is ``kubernetes`` with GFD's model. UUIDs are not known: NULL.
    """
    slurm = slurm if slurm is not None else pl.DataFrame(schema=NODE_SCHEMA)
    ksm = ksm if ksm is not None else pl.DataFrame(schema=KSM_NODE_SCHEMA)
    k8s = {r["node"]: r for r in ksm.iter_rows(named=True)}
    rows: list[dict[str, object]] = []

    def add(node: str, pieces: list[tuple[str, int]], pool: str, partition: str, product: str,
            source: str) -> None:
        total = sum(n for _, n in pieces)
        index = 0
        for model, count in pieces:
            for _ in range(count):
                rows.append({"cluster": cluster, "node": node, "pool": pool, "gpu_model": model,
                             "gpu_count": total, "gpu_index": index, "gpu_uuid": None,
                             "slurm_partition": partition, "gpu_product": product,
                             "source": source})
                index += 1

    for node, group in slurm.group_by("node", maintain_order=True):
        name = str(node[0])
        kr = k8s.pop(name, None)
        pieces = [(m or (kr["gpu_model"] if kr else "") or "unknown", int(n))
                  for m, n in zip(group["gpu_model"], group["gpu_count"], strict=True)]
        add(name, pieces, "shared" if kr else "slurm", group["partitions"][0],
            kr["gpu_product"] if kr else "", "scontrol+ksm" if kr else "scontrol")
    for name, kr in sorted(k8s.items()):
        add(name, [(kr["gpu_model"] or "unknown", int(kr["gpu_count"]))], "kubernetes", "",
            kr["gpu_product"], "ksm")
    return pl.DataFrame(rows, schema=GPU_ROW_SCHEMA) if rows else pl.DataFrame(
        schema=GPU_ROW_SCHEMA)


def with_file_override(merged: pl.DataFrame, file_rows: pl.DataFrame | None) -> pl.DataFrame:
    """`merged` where every node the nodes file lists has the file's rows instead."""
    if file_rows is None or file_rows.height == 0:
        return merged
    cluster = merged["cluster"][0] if merged.height else file_rows["cluster"][0]
    from_file = file_rows.with_columns(cluster=pl.lit(cluster), gpu_product=pl.lit(""),
                                       source=pl.lit("nodes_file")).select(list(GPU_ROW_SCHEMA))
    kept = merged.filter(~pl.col("node").is_in(from_file["node"].unique().to_list()))
    return pl.concat([kept, from_file.cast(GPU_ROW_SCHEMA)]).sort(["node", "gpu_index"])


def inventory_rows(gpus: pl.DataFrame) -> pl.DataFrame:
    """Per-GPU rows -> one row per (cluster, node, gpu_model): the node_inventory state."""
    return gpus.group_by(list(INVENTORY_KEY), maintain_order=True).agg(
        pl.len().cast(pl.Int32).alias("gpu_count"), pl.col("pool").first(),
        pl.col("slurm_partition").first().fill_null(""),
        pl.col("gpu_product").first().fill_null(""), pl.col("source").first())


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class HistoryChange:
    opened: int
    closed: int


def apply_history(con: duckdb.DuckDBPyConnection, table: schema.Table, key: Sequence[str],
                  attrs: Sequence[str], state: pl.DataFrame, at: datetime, *, scope: str,
                  params: Sequence[object], first_unbounded: bool = False) -> HistoryChange:
    """Make the open rows of `table` within `scope` say `state` as of `at` (inside the
    caller's transaction). Unchanged keys are left alone."""
    cols = [*key, *attrs]
    open_rows = con.execute(
        f"SELECT {', '.join(cols)}, valid_from FROM {table.name} "
        f"WHERE valid_to IS NULL AND ({scope})", list(params)).fetchall()
    before = {tuple(r[:len(key)]): tuple(r[len(key):len(cols)]) for r in open_rows}
    since = {tuple(r[:len(key)]): r[-1] for r in open_rows}
    now = {tuple(r[c] for c in key): tuple(r[a] for a in attrs)
           for r in state.select(cols).iter_rows(named=True)}
    gone = [k for k, v in before.items() if now.get(k) != v]
    new = [k for k, v in now.items() if before.get(k) != v]
    for k in gone:
        if since[k] is not None and since[k] >= at:  # an older reading: the open row stays
            new = [n for n in new if n != k]
            continue
        where = " AND ".join(f"{c} IS NOT DISTINCT FROM ?" for c in key)
        con.execute(f"UPDATE {table.name} SET valid_to = ? WHERE valid_to IS NULL AND {where}",
                    [at, *k])
    known: set[tuple] = set()
    if first_unbounded and new:
        known = {tuple(r) for r in con.execute(
            f"SELECT DISTINCT {', '.join(key)} FROM {table.name} WHERE ({scope})",
            list(params)).fetchall()}
    for k in new:
        start = None if first_unbounded and k not in known else at
        con.execute(f"INSERT INTO {table.name} ({', '.join(cols)}, valid_from, valid_to) "
                    f"VALUES ({', '.join('?' * (len(cols) + 1))}, NULL)", [*k, *now[k], start])
    return HistoryChange(opened=len(new), closed=len(gone))


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

