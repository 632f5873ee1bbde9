"""sreport figures (cluster utilization, account usage by user) for a window, for reconciling
the ledger with Slurm's own roll-ups (docs/slurm.md)."""

from datetime import datetime

import duckdb

from connectors.slurm.commands import CommandRunner
from connectors.slurm.sreport import (
    parse_account_utilization_by_user,
    parse_cluster_utilization,
)
from connectors.times import utc_naive as _utc_naive
from models import schema
from models.runner import replace_rows, transaction

SREPORT_TRES = "gres/gpu"


def sreport_commands(start: datetime, end: datetime) -> list[list[str]]:
    """The two sreport calls for a window (run with ``TZ=UTC``)."""
    fmt = "%Y-%m-%dT%H:%M:%S"
    window = [f"start={_utc_naive(start):{fmt}}", f"end={_utc_naive(end):{fmt}}"]
    base = ["sreport", "-P", "-t", "seconds", "-T", SREPORT_TRES, "cluster"]
    return [[*base, "utilization", *window], [*base, "AccountUtilizationByUser", *window]]


def store_sreport(
    con: duckdb.DuckDBPyConnection, utilization_text: str, account_text: str, source: str
) -> tuple[int, int]:
    """Replace the sreport figures of the report's window (both reports in one transaction)."""
    util = parse_cluster_utilization(utilization_text, source_file=f"{source} utilization")
    accounts = parse_account_utilization_by_user(account_text, source_file=f"{source} accounts")
    with transaction(con):
        for table, frame in ((schema.SREPORT_UTILIZATION, util),
                             (schema.SREPORT_ACCOUNT_USAGE, accounts)):
            windows = frame.select("cluster", "report_start", "report_end").unique()
            for cluster, rs, re in windows.iter_rows():
                con.execute(
                    f"DELETE FROM {table.name} WHERE cluster = ? AND report_start = ? "
                    "AND report_end = ?", [cluster, rs, re],
                )
            replace_rows(con, table, frame, where="FALSE", atomic=False)
    return util.height, accounts.height


def ingest_sreport(
    con: duckdb.DuckDBPyConnection, runner: CommandRunner, start: datetime, end: datetime
) -> tuple[int, int]:
    """Run both sreport reports for ``[start, end)`` and store them."""
    util_cmd, acct_cmd = sreport_commands(start, end)
    env = {"TZ": "UTC"}
    return store_sreport(con, runner.run(util_cmd, env), runner.run(acct_cmd, env),
                         source=f"sreport {start:%Y-%m-%dT%H:%M:%S}")
