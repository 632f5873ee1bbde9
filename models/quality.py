"""The data-quality gate: per cluster and UTC day, how far the sources cover what is charged.

``build_data_quality`` rebuilds ``data_quality_days`` for a range of days (after allocations and
hourly usage): dcgm sample coverage, the longest scrape gap, the share of jobs and pods with an
owner (``models/attribution.py``), nodes outside the inventory, the difference from sreport,
Kubernetes ingest warnings and rejects. A day beyond a ``[gpuledger.quality]`` threshold is
provisional, with its reasons; the invoice views mark the lines holding its GPU-time
(``models/schema/invoices.py`` ``invoice_lines``: the one rule).
"""

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

import duckdb

from models import load_sql
from models.attribution import UNATTRIBUTED
from models.runner import transaction
from models.scalars import one_row, scalar
from models.schema import BUILT_DAYS, DATA_QUALITY_DAYS

_SREPORT_TABLE = "quality_sreport"


@dataclass(frozen=True)
class QualityThresholds:
    """Thresholds of the data-quality gate (the site file's ``[gpuledger.quality]``; why each
    default, in docs/site-file.md): a cluster's day beyond any of them is provisional. ``None``:
    not gated."""

    min_sample_coverage: float = 0.80
    max_scrape_gap_minutes: float = 30.0
    min_attributed_share: float = 0.95
    max_unknown_nodes: float = 0.0
    max_sreport_difference: float = 0.01
    max_k8s_rejects: float = 0.0
    max_k8s_warnings: float | None = None
    # GPU-hours both schedulers held on one node while the pods' GPUs were unknown (no pod
    # labels in dcgm-exporter): double scheduling there can be neither proved nor ruled out
    max_unverified_overlap_gpu_hours: float | None = None


def _window_days(start: datetime, end: datetime) -> list[date]:
    """The whole UTC days inside an sreport window [start, end)."""
    day = start.date() if start.time() == datetime.min.time() else start.date() + timedelta(days=1)
    days = []
    while datetime.combine(day + timedelta(days=1), datetime.min.time()) <= end:
        days.append(day)
        day += timedelta(days=1)
    return days


def _sreport_windows(con: duckdb.DuckDBPyConnection, first_day: date, end_day: date
                     ) -> list[tuple[Any, ...]]:
    """(cluster, start, end) of the gres/gpu windows overlapping [first_day, end_day), the
    shortest first."""
    return con.execute(
        "SELECT DISTINCT cluster, report_start, report_end FROM sreport_account_usage "
        "WHERE tres_name = 'gres/gpu' AND report_start < ? AND report_end > ? "
        "ORDER BY report_end - report_start, cluster, report_start",
        [end_day, first_day]).fetchall()


def _sreport_differences(con: duckdb.DuckDBPyConnection, windows: list[tuple[Any, ...]],
                         building: tuple[date, date]) -> list[tuple[Any, ...]]:
    """(cluster, day, window, sum |ours - sreport| / larger side, days of the window not built)
    for each day that lies whole inside an sreport gres/gpu window; the shortest such window
    speaks for the day. A window some of whose days are neither built nor ``building`` was
    compared with part of the ledger: its count of such days says so."""
    built = {d for (d,) in con.execute(f"SELECT day FROM {BUILT_DAYS.name}").fetchall()}
    best: dict[tuple[str, date], tuple[Any, ...]] = {}
    reconciliation = load_sql("slurm_sreport_reconciliation")
    for cluster, start, end in windows:
        ours, theirs, off = one_row(
            con, "SELECT coalesce(sum(ours_gpu_seconds), 0), "
            "coalesce(sum(sreport_gpu_seconds), 0), "
            f"coalesce(sum(abs(difference)), 0) FROM ({reconciliation}) WHERE cluster = $cluster",
            {"window_start": start, "window_end": end, "cluster": cluster})
        share = float(off) / max(float(ours), float(theirs), 1.0)
        label = f"{start:%Y-%m-%d %H:%M} .. {end:%Y-%m-%d %H:%M}"
        days = _window_days(start, end)
        missing = sum(1 for d in days if d not in built and not building[0] <= d <= building[1])
        for day in days:
            best.setdefault((cluster, day), (cluster, day, label, share, missing, len(days)))
    return list(best.values())


def quality_params(first_day: date, end_day: date, thresholds: QualityThresholds) -> dict[str, Any]:
    return {
        "first_day": first_day, "end_day": end_day, "unattributed": UNATTRIBUTED,
        "min_sample_coverage": thresholds.min_sample_coverage,
        "max_scrape_gap_minutes": thresholds.max_scrape_gap_minutes,
        "min_attributed_share": thresholds.min_attributed_share,
        "max_unknown_nodes": thresholds.max_unknown_nodes,
        "max_sreport_difference": thresholds.max_sreport_difference,
        "max_k8s_rejects": thresholds.max_k8s_rejects,
        "max_k8s_warnings": thresholds.max_k8s_warnings,
        "max_unverified_overlap_gpu_hours": thresholds.max_unverified_overlap_gpu_hours,
    }


def build_data_quality(con: duckdb.DuckDBPyConnection, first_day: date, last_day: date,
                       thresholds: QualityThresholds | None = None) -> int:
    """Rebuild ``data_quality_days`` for ``first_day`` .. ``last_day`` (inclusive) and for every
    day of the sreport windows that overlap them: those days' verdicts compare a window with
    the ledger these days are part of, so they change when these days land. Returns the
    provisional (cluster, day) rows of ``first_day`` .. ``last_day``."""
    end_day = last_day + timedelta(days=1)
    days = [r[1] for r in _sreport_differences(
        con, _sreport_windows(con, first_day, end_day), (first_day, last_day))]
    span_first, span_end = min([first_day, *days]), max([end_day, *(d + timedelta(days=1)
                                                                     for d in days)])
    # the span's days again: one of them may lie in a shorter window that speaks for it
    rows = [r for r in _sreport_differences(
        con, _sreport_windows(con, span_first, span_end), (first_day, last_day))
        if span_first <= r[1] < span_end]
    con.execute(f"CREATE OR REPLACE TEMP TABLE {_SREPORT_TABLE} (cluster VARCHAR, day DATE, "
                "sreport_window VARCHAR, sreport_difference DOUBLE, sreport_days_missing "
                "INTEGER, sreport_days INTEGER)")
    if rows:
        con.executemany(f"INSERT INTO {_SREPORT_TABLE} VALUES (?, ?, ?, ?, ?, ?)", rows)
    params = quality_params(span_first, span_end, thresholds or QualityThresholds())
    with transaction(con):
        con.execute(f"DELETE FROM {DATA_QUALITY_DAYS.name} WHERE day >= ? AND day < ?",
                    [span_first, span_end])
        con.execute(f"INSERT INTO {DATA_QUALITY_DAYS.name} BY NAME "
                    f"{load_sql('data_quality_daily')}", params)
        provisional = scalar(con,
            f"SELECT count(*) FROM {DATA_QUALITY_DAYS.name} WHERE day >= ? AND day < ? "
            "AND provisional", [first_day, end_day])
    con.execute(f"DROP TABLE IF EXISTS {_SREPORT_TABLE}")
    return int(provisional)


def provisional_days(con: duckdb.DuckDBPyConnection, first_day: date, end_day: date
                     ) -> list[tuple[Any, ...]]:
    """(cluster, day, reasons) of the provisional days in [first_day, end_day)."""
    return con.execute(
        f"SELECT cluster, day, reasons FROM {DATA_QUALITY_DAYS.name} WHERE provisional "
        "AND day >= ? AND day < ? ORDER BY day, cluster", [first_day, end_day]).fetchall()
