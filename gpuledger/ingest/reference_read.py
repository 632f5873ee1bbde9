"""Reading a cluster's reference data, with no ledger connection open (``import-reference``,
``gpuledger/ingest/reference.py`` writes it): nodes from ``scontrol -o show node`` and
kube-state-metrics, accounts from ``sacctmgr``, namespace owners from ``kube_namespace_labels``,
merged with the site's nodes file as overrides."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import polars as pl

from connectors.errors import Reject
from connectors.gpu_sharing import DEFAULT_NAMES, SharingNames
from connectors.kubernetes.ksm_namespaces import ksm_namespace_owners
from connectors.kubernetes.ksm_nodes import KSM_NODE_SCHEMA, ksm_node_inventory
from connectors.kubernetes.ksm_slices import ksm_node_slices
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.slurm.commands import CommandRunner
from connectors.slurm.sacctmgr import SACCTMGR_ASSOC_COMMAND, parse_sacctmgr_assoc
from connectors.slurm.scontrol_nodes import (
    NODE_SCHEMA,
    SCONTROL_NODES_COMMAND,
    node_slices,
    parse_scontrol_nodes,
    slinky_node_pods,
)

INVENTORY_KEY = ("cluster", "node", "gpu_model")
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
