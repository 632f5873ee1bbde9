"""Slurm sources from the site file, one per ``[gpuledger.clusters.<name>.slurm]`` table.

Every read happens with the ledger closed: live, sacct/sreport/scontrol run first (a slow
``ssh login-node`` prefix never holds the writer lock) and their output is then written in short
transactions by the same library calls the CLI makes; a dump is a local file and is parsed while
written.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb

from connectors.slurm.fields import SACCT_ENVIRONMENT, sacct_command
from connectors.slurm.parse import parse_sacct
from connectors.slurm.scontrol import ScontrolParse, fetch_scontrol_jobs
from gpuledger.ingest.slurm import run as slurm_ingest
from gpuledger.ingest.slurm import scontrol as scontrol_ingest
from gpuledger.site import ClusterSite, SlurmSite
from gpuledger.site.sources import slurm_limits, slurm_runner
from pipelines.site import read_site

SREPORT_ENVIRONMENT = {"TZ": "UTC"}  # as slurm_ingest.ingest_sreport runs it


class _Recorded:
    """A runner that answers with what the real one printed before the ledger was opened, so the
    library's ``ingest_*`` functions (the CLI's path) store it unchanged."""

    def __init__(self, outputs: dict[tuple[str, ...], str]) -> None:
        self.outputs = outputs

    def run(self, command: Sequence[str], environment: dict[str, str]) -> str:
        key = tuple(command)
        if key not in self.outputs:
            msg = f"expected a recorded command among {sorted(self.outputs)}, found {key}"
            raise KeyError(msg)
        return self.outputs[key]


def _binary(slurm: SlurmSite, command: list[str]) -> list[str]:
    """The command with the site's sacct binary (``sacct = "/opt/slurm/bin/sacct"``)."""
    if command[0] == "sacct" and slurm.sacct and slurm.sacct != "sacct":
        return [slurm.sacct, *command[1:]]
    return command


@dataclass(frozen=True)
class SacctRead:
    """One cluster's sacct for a window, read with the ledger closed (live mode), or the dump
    to parse (dump mode, ``text`` is None)."""

    cluster: ClusterSite
    start: datetime
    end: datetime
    text: str | None
    observed_at: datetime | None
    source: str


@dataclass(frozen=True)
class SreportRead:
    cluster: ClusterSite
    utilization: str
    accounts: str
    source: str


class SlurmSourceResource(dg.ConfigurableResource):
    """The Slurm side of every cluster of the site file: live ``sacct``/``sreport``/``scontrol``
    (``mode = "sacct"``, through the cluster's ``prefix``) or exported dump files."""

    site_file: str

    def clusters(self) -> list[ClusterSite]:
        return [c for c in read_site(self.site_file).clusters if c.slurm is not None]

    # ------------------------------------------------------------------ sacct

    def read_window(self, cluster: ClusterSite, start: datetime, end: datetime) -> SacctRead:
        """Run sacct for ``[start - lookback, end)`` (no ledger connection is open)."""
        slurm = _slurm(cluster)
        if slurm.mode != "sacct":
            return SacctRead(cluster, start, end, None, None, str(slurm.dump))
        lookback = timedelta(hours=slurm.lookback_hours)
        command = sacct_command(*slurm_ingest.sacct_window(start, end, lookback))
        text = slurm_runner(slurm).run(_binary(slurm, command), SACCT_ENVIRONMENT)
        observed = datetime.now(UTC).replace(tzinfo=None)  # what sacct said holds now
        return SacctRead(cluster, start, end, text, observed, f"sacct ({slurm.prefix or 'local'})")

    def write_window(self, con: duckdb.DuckDBPyConnection, read: SacctRead,
                     ) -> slurm_ingest.SlurmLoad:
        slurm = _slurm(read.cluster)
        lookback = timedelta(hours=slurm.lookback_hours)
        if read.text is not None:
            command = sacct_command(*slurm_ingest.sacct_window(read.start, read.end, lookback))
            return slurm_ingest.ingest_slurm_window(
                con, _Recorded({tuple(command): read.text}), read.start, read.end,  # type: ignore[arg-type]
                lookback=lookback, now=read.observed_at, limits=slurm_limits(slurm),
            )
        return _store_dump(con, read.cluster, slurm, read.start, read.end, lookback)

    # ------------------------------------------------------------------ sreport

    def read_sreport(self, cluster: ClusterSite, start: datetime, end: datetime,
                     ) -> SreportRead | None:
        """Both sreport reports of the window (live) or the exported ones; None: not configured."""
        slurm = _slurm(cluster)
        if slurm.mode == "sacct":
            if not slurm.sreport:
                return None
            runner = slurm_runner(slurm)
            util_cmd, acct_cmd = slurm_ingest.sreport_commands(start, end)
            return SreportRead(cluster, runner.run(util_cmd, SREPORT_ENVIRONMENT),
                               runner.run(acct_cmd, SREPORT_ENVIRONMENT),
                               f"sreport {start:%Y-%m-%dT%H:%M:%S}")
        if slurm.sreport_utilization is None or slurm.sreport_accounts is None:
            return None
        return SreportRead(cluster, slurm.sreport_utilization.read_text(encoding="utf-8"),
                           slurm.sreport_accounts.read_text(encoding="utf-8"),
                           str(slurm.sreport_utilization.parent))

    def write_sreport(self, con: duckdb.DuckDBPyConnection, read: SreportRead) -> tuple[int, int]:
        return slurm_ingest.store_sreport(con, read.utilization, read.accounts, source=read.source)

    # ------------------------------------------------------------------ scontrol

    def scontrol_files(self, cluster: ClusterSite) -> list[Path]:
        """The saved ``scontrol show job -d`` snapshots of a dump-mode cluster, oldest first."""
        return scontrol_ingest.snapshot_folder_files(_slurm(cluster).scontrol_snapshots)

    def take_scontrol(self, cluster: ClusterSite) -> ScontrolParse:
        """``scontrol --all --details show job`` now, through the cluster's prefix."""
        return fetch_scontrol_jobs(slurm_runner(_slurm(cluster)))

    def store_scontrol(self, con: duckdb.DuckDBPyConnection,
                       parsed: ScontrolParse) -> scontrol_ingest.ScontrolLoad:
        label = (f"scontrol {parsed.observed_at:%Y-%m-%dT%H:%M:%S}" if parsed.observed_at
                 else "scontrol")
        return scontrol_ingest.store_scontrol(con, parsed, source_file=label)


def _slurm(cluster: ClusterSite) -> SlurmSite:
    if cluster.slurm is None:
        msg = f"expected a [gpuledger.clusters.{cluster.name}.slurm] table, found none"
        raise ValueError(msg)
    return cluster.slurm


def _store_dump(con: duckdb.DuckDBPyConnection, cluster: ClusterSite, slurm: SlurmSite,
                start: datetime, end: datetime, lookback: timedelta) -> slurm_ingest.SlurmLoad:
    """The dump's runs of ``[start - lookback, end)``, observed when the dump was taken."""
    dump = str(slurm.dump)
    as_of = slurm.dump_as_of
    limits = slurm_ingest.sanity_limits(
        con, observed_at=as_of or datetime.now(UTC).replace(tzinfo=None),
        observed_what="the dump's as-of time" if as_of else "the time of the import",
        charged_until=as_of, base=slurm_limits(slurm),
    )
    parsed = parse_sacct(Path(dump), timezone=slurm.dump_timezone, source_file=dump,
                         cluster=cluster.name, limits=limits)
    observed = as_of or slurm_ingest.default_observed_until(parsed)
    window = slurm_ingest.within_window(parsed, start - lookback, end)
    seen = min(end, as_of) if as_of else end
    return slurm_ingest.store_sacct(
        con, window, source_file=dump, observed_until=seen, observed_at=observed,
        partition_key=f"{start:%Y-%m-%d}", window=(start, end),
    )
