"""The sanity limits of sacct lines as held at load: the configured limits
(``[gpuledger.slurm_limits]``) with the ledger's node inventory, the observation time that times
must not pass and how far runs still going are charged (:mod:`connectors.slurm.sanity`).

Sanity limits (``connectors.slurm.sanity``) are held where the node inventory is at hand: here, at
load, with the observation time for times in the future.
"""

import ipaddress
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

import duckdb

from connectors.slurm.sanity import SanityLimits
from connectors.times import utc_naive as _utc_naive
from gpuledger.ingest.nodenames import NodeNamer, load_namer
from gpuledger.ingest.slurm.store import node_gpu_counts


def inventory_name(namer: NodeNamer) -> Callable[[str], str]:
    """A node name as a dump prints it → the name the inventory uses, without deciding anything
    (the parser runs batches in parallel; the names are recorded later, by ``namer`` itself):
    the ledger's register of names, else a configured alias, else the short name of a dotted
    name that is not an IP address (gpuledger.ingest.nodenames)."""
    known = dict(namer.known)
    aliases = {k.strip().lower(): v.strip() for k, v in namer.aliases.items()}

    def name(raw: str) -> str:
        if raw in known:
            return known[raw]
        text = raw.strip()
        alias = aliases.get(text.lower())
        if alias:
            return alias
        if "." in text:
            try:
                ipaddress.ip_address(text)
            except ValueError:
                return text.split(".", 1)[0]
        return text

    return name


def sanity_limits(con: duckdb.DuckDBPyConnection, *, observed_at: datetime | None,
                  observed_what: str, charged_until: datetime | None = None,
                  base: SanityLimits | None = None) -> SanityLimits:
    """``base`` (the configured limits, else the defaults) with the ledger's node inventory, the
    observation time that times must not pass and how far runs still going are charged
    (connectors.slurm.sanity)."""
    inventory = node_gpu_counts(con)
    return replace(
        base or SanityLimits(), inventory=inventory,
        canonical=inventory_name(load_namer(con)) if inventory else None,
        observed_at=_utc_naive(observed_at) if observed_at else None, observed_what=observed_what,
        charged_until=_utc_naive(charged_until) if charged_until else None,
    )


def configured_limits(settings: object) -> SanityLimits:
    """The sanity limits of ``[gpuledger.slurm_limits]`` in the settings file (any of
    ``max_gpus_per_node``, ``max_gpus_per_job``, ``max_elapsed_days``, ``clock_skew_seconds``;
    the others keep their defaults). ``ValueError`` for an unknown key or a bad value."""
    extra = getattr(settings, "extra", {}) or {}
    table = extra.get("slurm_limits")
    if table is not None and not isinstance(table, dict):
        msg = ("expected [gpuledger.slurm_limits] as a table of limits (max_gpus_per_node = 64, "
               f"…), found {table!r}")
        raise ValueError(msg)
    return SanityLimits.from_config(table)
