"""The live inputs of an alert tick, read from the site's sources without writing the ledger.

1. :func:`read_ledger_context`: the identity data (``identity_map``, ``identity_candidates``,
   ``slurm_accounts``), the rate card and the GPU models of the nodes, in one short read-only
   connection closed before any source is read.
2. :func:`read_cluster`: per cluster, the window ``[as_of - lookback, as_of]`` from its sources
   with the project's connectors: dcgm-exporter samples (``dcgm_samples``, unlabelled samples
   attributed by ``attribute_samples`` as the ingest does), kube-state-metrics pods
   (``pod_gpu_allocations``) and Slurm runs (sacct for the window, or the dump in file mode).
3. :func:`held_allocations`: the allocations holding GPUs at ``as_of``, one per node, with the
   owner resolved by the ledger's own rule (``models/sql/resolve_identity.sql``) and the rate
   by its one rate precedence (``models/sql/rate_for_allocation.sql``), both run on the frames
   of step 1 in an in-memory DuckDB: no second identity or pricing rule.
"""

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import polars as pl

from connectors.kubernetes.dcgm import dcgm_samples
from connectors.kubernetes.dcgm_attribution import attribute_samples
from connectors.kubernetes.ksm import node_gpu_capacity, pod_gpu_allocations
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.slurm.fields import SACCT_ENVIRONMENT, sacct_command
from connectors.slurm.node_split import allocations_per_node
from connectors.slurm.parse import parse_sacct
from gpuledger.alerts.evaluate import SAMPLE_COLUMNS, HeldAllocation
from gpuledger.ingest.slurm.run import sacct_window, within_window
from gpuledger.site import ClusterSite, Site
from gpuledger.site.sources import metrics_source, slurm_limits, slurm_runner
from models import load_sql
from models.schema import IDENTITY_CANDIDATES, IDENTITY_MAP, NODES, RATE_CARD, SLURM_ACCOUNTS

CONTEXT_TABLES = (IDENTITY_MAP, IDENTITY_CANDIDATES, SLURM_ACCOUNTS, RATE_CARD)


@dataclass(frozen=True)
class LedgerContext:
    tables: dict[str, pl.DataFrame]
    node_models: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def _empty(table: object) -> pl.DataFrame:
    con = duckdb.connect()
    try:
        con.execute(table.ddl())  # type: ignore[attr-defined]
        return con.execute(f"SELECT * FROM {table.name}").pl()  # type: ignore[attr-defined]
    finally:
        con.close()


def read_ledger_context(db: Path) -> LedgerContext:
    """Identity data, rate card and node models from the ledger (read-only, closed at once)."""
    if not db.is_file():
        return LedgerContext({t.name: _empty(t) for t in CONTEXT_TABLES}, {}, (
            f"no ledger at {db}: owners unattributed and no cost (alerts go to the admins)",))
    con = duckdb.connect(str(db), read_only=True)
    try:
        present = {r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables").fetchall()}
        tables = {t.name: (con.execute(f"SELECT * FROM {t.name}").pl() if t.name in present
                           else _empty(t)) for t in CONTEXT_TABLES}
        models: dict[str, str] = {}
        if NODES.name in present:
            for node, model in con.execute(
                    f"SELECT node, arg_max(gpu_model, cluster) FROM {NODES.name} "
                    "WHERE coalesce(gpu_model, '') <> '' GROUP BY node").fetchall():
                models[node] = model
    finally:
        con.close()
    return LedgerContext(tables, models)


# --------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class ClusterRead:
    samples: pl.DataFrame  # SAMPLE_COLUMNS
    pods: pl.DataFrame  # POD_GPU_ALLOCATION_SCHEMA, pods still holding GPUs at as_of
    runs: pl.DataFrame  # per node: NODE_ALLOCATIONS_SCHEMA + user, account, qos, job_name
    warnings: tuple[str, ...] = ()


def _samples(cluster: str, frame: pl.DataFrame) -> pl.DataFrame:
    cols = {c: (pl.col(c) if c in frame.columns else pl.lit(None)).cast(t).alias(c)
            for c, t in SAMPLE_COLUMNS.items() if c not in ("cluster", "busy")}
    return frame.select(pl.lit(cluster).alias("cluster"), *cols.values(),
                        pl.col("value").cast(pl.Float64).alias("busy")).select(
        list(SAMPLE_COLUMNS))


class WindowSource:
    """A metrics source whose reads are clipped to the tick's window: dcgm_samples would read
    the whole UTC days around it (its metric choice is per GPU-day for the ledger); a tick
    needs three hours, not two days, and decides the metric on what it reads."""

    def __init__(self, source: MetricsSource, start: datetime, end: datetime) -> None:
        self.source, self.start, self.end = source, start, end

    def raw_samples(self, selector: str, start: datetime, end: datetime) -> pl.DataFrame:
        return self.source.raw_samples(selector, max(start, self.start), min(end, self.end))

    def series(self, match: str, start: datetime, end: datetime) -> pl.DataFrame:
        return self.source.series(match, max(start, self.start), min(end, self.end))


def _kubernetes(c: ClusterSite, start: datetime, end: datetime, as_of: datetime,
                site: Site, warnings: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    assert c.prometheus is not None
    source = metrics_source(c.prometheus)
    interval = (timedelta(seconds=c.prometheus.scrape_interval_s)
                if c.prometheus.scrape_interval_s else None)
    notes: list[str] = []
    pods = pod_gpu_allocations(source, start, end, scrape_interval=interval,
                               names=site.sharing, notes=notes)
    capacity = node_gpu_capacity(source, start, end, scrape_interval=interval, notes=notes)
    raw = dcgm_samples(WindowSource(source, start, end), start, end, warnings)
    if raw.height:
        whole = pods.filter(pl.col("gpu_resource") == "nvidia_com_gpu")
        raw = attribute_samples(raw, whole, capacity, warnings)
    warnings.extend(dict.fromkeys(notes))
    # still held at as_of: no completion seen and the interval reaches the last scrapes
    slack = pl.duration(seconds=pl.col("scrape_interval_s").fill_null(60.0) * 2)
    held = pods.filter((pl.col("end_source") != "kube_pod_completion_time").fill_null(True)
                       & (pl.col("end_ts") + slack >= as_of) & (pl.col("start_ts") <= as_of)
                       & pl.col("node").is_not_null())
    return _samples(c.name, raw) if raw.height else pl.DataFrame(schema=SAMPLE_COLUMNS), held


def _slurm(c: ClusterSite, start: datetime, end: datetime, as_of: datetime,
           node_models: dict[str, str]) -> pl.DataFrame:
    s = c.slurm
    assert s is not None
    limits = slurm_limits(s)
    if s.mode == "dump":
        assert s.dump is not None
        parsed = parse_sacct(s.dump, timezone=s.dump_timezone, source_file=str(s.dump),
                             cluster=c.name, limits=limits)
    else:
        a, b = sacct_window(start, end, timedelta(0))
        text = slurm_runner(s).run(sacct_command(a, b), SACCT_ENVIRONMENT)
        parsed = parse_sacct(text, timezone="UTC", source_file=f"sacct {a}..{b}",
                             cluster=c.name, limits=limits)
    runs = within_window(parsed, start, end).runs.filter(
        (pl.col("start") <= as_of) & (pl.col("end").is_null() | (pl.col("end") > as_of)))
    if runs.height == 0:
        return pl.DataFrame()
    per_node = allocations_per_node(runs, node_models)
    extra = runs.select("run_key", "job_name", "user", "account", "qos",
                        pl.col("job_id_raw").alias("_raw"))
    return per_node.join(extra, on="run_key", how="left").filter(pl.col("gpus") > 0)


def read_cluster(c: ClusterSite, site: Site, as_of: datetime, lookback: timedelta,
                 node_models: dict[str, str]) -> ClusterRead:
    """Everything one cluster's sources say about ``[as_of - lookback, as_of]`` (no ledger)."""
    start, end = as_of - lookback, as_of + timedelta(seconds=1)
    warnings: list[str] = []
    samples = pl.DataFrame(schema=SAMPLE_COLUMNS)
    pods = pl.DataFrame()
    if c.prometheus is not None:
        logger = logging.getLogger("connectors.kubernetes")
        level = logger.level
        logger.setLevel(logging.ERROR)  # the readers' notes are returned as warnings instead
        try:
            samples, pods = _kubernetes(c, start, end, as_of, site, warnings)
        finally:
            logger.setLevel(level)
    runs = _slurm(c, start, end, as_of, node_models) if c.slurm is not None else pl.DataFrame()
    return ClusterRead(samples, pods, runs, tuple(f"{c.name}: {w}" for w in warnings))


# --------------------------------------------------------------------------- owners and rates


def _pieces(cluster: str, read: ClusterRead, day: object,
            node_models: dict[str, str]) -> list[dict]:
    rows = []
    for r in read.runs.iter_rows(named=True) if read.runs.height else []:
        rows.append({
            "domain": "slurm", "cluster": cluster, "ident": r["job_id"], "node": r["node"],
            "gpus": r["gpus"], "started": r["start"], "job_id": r["job_id"],
            "job_id_raw": str(r["_raw"]) if r["_raw"] is not None else None,
            "job_name": r["job_name"], "user": r["user"], "account": r["account"],
            "qos": r["qos"] or "", "gpu_model": r["gpu_model"] or node_models.get(r["node"]),
            "sharing": r["sharing"],
            "slurm_user": r["user"], "slurm_account": r["account"], "day": day,
        })
    for r in read.pods.iter_rows(named=True) if read.pods.height else []:
        labels = pl.Series([r["labels"] or "{}"]).str.json_decode().to_list()[0] or {}
        rows.append({
            "domain": "kubernetes", "cluster": cluster, "ident": r["uid"], "node": r["node"],
            "gpus": r["gpus"], "started": r["start_ts"], "namespace": r["namespace"],
            "pod": r["pod"], "qos": "", "gpu_model": node_models.get(r["node"]),
            "sharing": r["sharing"],
            "k8s_namespace": r["namespace"],
            "k8s_service_account": (f"{r['namespace']}/{r['service_account']}"
                                    if r["service_account"] else None),
            "kueue_queue": f"{r['namespace']}/{r['queue_name']}" if r["queue_name"] else None,
            "kueue_cluster_queue": r["cluster_queue"] or None,
            "pod_labels": sorted(f"{k}={v}" for k, v in labels.items()) or None, "day": day,
        })
    return rows


PIECE_SCHEMA = {"piece_id": pl.Int64, "domain": pl.String, "day": pl.Date,
                "slurm_user": pl.String, "slurm_account": pl.String, "k8s_namespace": pl.String,
                "k8s_service_account": pl.String, "kueue_queue": pl.String,
                "kueue_cluster_queue": pl.String, "pod_labels": pl.List(pl.String)}


def held_allocations(reads: dict[str, ClusterRead], context: LedgerContext,
                     as_of: datetime) -> list[HeldAllocation]:
    """The allocations holding GPUs at ``as_of`` with owners and rates (see the module doc)."""
    rows = []
    for cluster, read in reads.items():
        rows += _pieces(cluster, read, as_of.date(), context.node_models)
    if not rows:
        return []
    pieces = pl.DataFrame([{**{k: r.get(k) for k in PIECE_SCHEMA if k != "piece_id"},
                            "piece_id": i} for i, r in enumerate(rows)], schema=PIECE_SCHEMA)
    keys = pl.DataFrame({"day": [as_of.date()] * len(rows), "domain": [r["domain"] for r in rows],
                         "gpu_model": [r["gpu_model"] for r in rows],
                         "qos": [r["qos"] or "" for r in rows]})
    con = duckdb.connect()  # in memory: the ledger's rules on copies of its reference tables
    try:
        for name, frame in context.tables.items():
            con.register(f"_{name}", frame)
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}")
        con.register("identity_pieces", pieces)
        con.register("rate_keys", keys)
        owners = {r[0]: r[1:] for r in con.execute(
            f"SELECT piece_id, person, team, cost_centre FROM ({load_sql('resolve_identity')})"
        ).fetchall()}
        rates = {(r[0], r[1], r[2]): (r[3], r[4]) for r in con.execute(
            "SELECT domain, gpu_model, qos, rate_per_gpu_hour, currency FROM "
            f"({load_sql('rate_for_allocation')})").fetchall()}
    finally:
        con.close()
    out = []
    fields = set(HeldAllocation.__dataclass_fields__)
    for i, r in enumerate(rows):
        person, team, centre = owners.get(i, (None, None, None))
        rate, currency = rates.get((r["domain"], r["gpu_model"], r["qos"] or ""), (None, None))
        if r.get("sharing"):  # MIG, shards, replicas: their pricing rule needs the ledger's
            rate, currency = None, None  # allocation rows (allocation_prices.sql); not guessed
        out.append(HeldAllocation(**{k: v for k, v in r.items() if k in fields},
                                  person=person, team=team, cost_centre=centre,
                                  rate_per_gpu_hour=Decimal(rate) if rate is not None else None,
                                  currency=currency))
    return out
