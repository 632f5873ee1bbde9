from collections.abc import Callable
from pathlib import Path

import dagster as dg
import duckdb

from gpuledger.ingest import reference as reference_ingest
from gpuledger.ingest import service
from gpuledger.ingest.loads import LoadResult
from gpuledger.site import Site
from pipelines.defs.resources import LEDGER_POOL, LedgerResource, SiteResource

GROUP = "reference"

Loader = Callable[[duckdb.DuckDBPyConnection, Path], LoadResult]


def has_live_sources(site: Site) -> bool:
    """A cluster with live Slurm commands or a Prometheus URL: reference data then comes from
    the sources, with the site's files as overrides. A file-mode site (the sample world)
    keeps its files only."""
    return any((c.slurm is not None and c.slurm.mode == "sacct")
               or (c.prometheus is not None and bool(c.prometheus.url)) for c in site.clusters)


def _reference_asset(name: str, file_name: str, load: Loader, description: str):
    """An unpartitioned asset that replaces one reference table with one CSV file."""

    @dg.asset(name=name, group_name=GROUP, kinds={"duckdb", "csv"}, description=description,
              pool=LEDGER_POOL)
    def _asset(ledger: LedgerResource, site: SiteResource) -> dg.MaterializeResult:
        path = getattr(site.load().reference, file_name)
        if path is None:
            return dg.MaterializeResult(metadata={"rows": 0, "rejected": 0,
                                                  "source_file": "none in the site file"})
        with ledger.ledger() as con:
            result = load(con, path)
        return dg.MaterializeResult(
            metadata={"rows": result.rows, "rejected": len(result.rejects),
                      "source_file": str(path)}
        )

    return _asset


def _from_sources(name: str, part: str, file_name: str, file_load: Loader | None,
                  description: str):
    """An asset that reads the site's sources (no ledger open while they are read) and then
    the site's file as an override; a file-mode site loads the file alone."""

    @dg.asset(name=name, group_name=GROUP, kinds={"duckdb"}, description=description,
              pool=LEDGER_POOL)
    def _asset(ledger: LedgerResource, site: SiteResource) -> dg.MaterializeResult:
        s = site.load()
        path = getattr(s.reference, file_name) if file_name else None
        if has_live_sources(s):
            result = reference_ingest.import_reference(
                s, ledger.ledger, parts=frozenset({part}), live_only=True)
            return dg.MaterializeResult(metadata={
                "rejected": result.rejects, "summary": dg.MetadataValue.md(
                    "\n".join(f"- {line}" for line in result.lines) or "nothing read"),
                "source_file": str(path or "none")})
        if path is None or file_load is None:
            return dg.MaterializeResult(metadata={"rows": 0, "rejected": 0,
                                                  "source_file": "none in the site file"})
        with ledger.ledger() as con:
            loaded = file_load(con, path)
        return dg.MaterializeResult(metadata={"rows": loaded.rows,
                                              "rejected": len(loaded.rejects),
                                              "source_file": str(path)})

    return _asset


def _load_nodes(con: duckdb.DuckDBPyConnection, path: Path) -> LoadResult:
    from pipelines.site import current_site

    return reference_ingest.import_nodes_file(con, path, current_site().clusters[0].name)


gpu_inventory = _from_sources(
    "gpu_inventory", "nodes", "nodes", _load_nodes,
    "GPU inventory: one row per GPU (nodes) and its history (node_inventory), from "
    "`scontrol -o show node` and kube-state-metrics, the nodes file overriding per node.",
)
slurm_accounts = _from_sources(
    "slurm_accounts", "accounts", "accounts", service.import_accounts,
    "The Slurm account tree from `sacctmgr show assoc`, the accounts file overriding per "
    "account.",
)
identity_candidates = _from_sources(
    "identity_candidates", "candidates", "", None,
    "Owners the sources name (sacctmgr users and accounts, kube_namespace_labels), used where "
    "the identity map names none.",
)
identity_map = _reference_asset(
    "identity_map", "identity_map", service.import_identity_map,
    "Identity map: raw Slurm and Kubernetes keys to person, team, cost centre.",
)
rate_card = _reference_asset(
    "rate_card", "rate_card", service.import_rate_card,
    "Effective-dated GPU-hour rates per GPU model, domain and QOS.",
)
