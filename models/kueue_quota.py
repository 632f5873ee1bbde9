"""Kueue quota history: ``kueue_quota_hourly`` for the days built, ``kueue_quota_weekly`` for
the ISO weeks they touch (docs/kubernetes.md "Kueue quota history").

Partition-scoped delete+insert in one transaction, so re-building a day changes nothing when
its gauges did not change. Reads only the ledger (``kueue_queue_resources``, ``kueue_pending``).
"""

from datetime import date, timedelta

import duckdb

from models import load_sql
from models.runner import transaction
from models.scalars import scalar
from models.schema import KUEUE_QUOTA_HOURLY, KUEUE_QUOTA_WEEKLY


def build_kueue_quota(con: duckdb.DuckDBPyConnection, first_day: date, last_day: date) -> int:
    """Rebuild the quota hours of the UTC days ``first_day`` .. ``last_day`` (inclusive) and
    the whole ISO weeks touching them; returns the hourly rows of those days."""
    end_day = last_day + timedelta(days=1)
    first_week = first_day - timedelta(days=first_day.weekday())
    end_week = last_day + timedelta(days=7 - last_day.weekday())
    with transaction(con):
        con.execute(f"DELETE FROM {KUEUE_QUOTA_HOURLY.name} WHERE day >= ? AND day < ?",
                    [first_day, end_day])
        con.execute(f"INSERT INTO {KUEUE_QUOTA_HOURLY.name} BY NAME "
                    f"{load_sql('kueue_quota_hourly')}",
                    {"first_day": first_day, "end_day": end_day})
        con.execute(f"DELETE FROM {KUEUE_QUOTA_WEEKLY.name} WHERE week_start >= ? "
                    "AND week_start < ?", [first_week, end_week])
        con.execute(f"INSERT INTO {KUEUE_QUOTA_WEEKLY.name} BY NAME "
                    f"{load_sql('kueue_quota_weekly')}",
                    {"first_week": first_week, "end_week": end_week})
        return int(scalar(con, f"SELECT count(*) FROM {KUEUE_QUOTA_HOURLY.name} "
                           "WHERE day >= ? AND day < ?", [first_day, end_day]))
