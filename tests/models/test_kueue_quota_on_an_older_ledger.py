"""A ledger written before the quota columns: opening it adds them last (older rows keep their
values, the new columns NULL) and its hours model as unknown, never as 0 % used."""

from datetime import date, datetime

import duckdb

from models import schema
from models.kueue_quota import build_kueue_quota
from models.runner import connect

OLD_COLUMNS = {
    "kueue_queue_resources": schema.KUEUE_QUEUE_RESOURCES.columns[:12],
    "kueue_pending": schema.KUEUE_PENDING.columns[:10],
}


def test_older_ledger_gains_the_columns_last_and_its_hours_are_unknown(tmp_path):
    db = tmp_path / "old.duckdb"
    with duckdb.connect(str(db)) as con:
        for name, columns in OLD_COLUMNS.items():
            cols = ", ".join(f'"{c}" {t}' for c, t in columns)
            con.execute(f"CREATE TABLE {name} ({cols})")
        hour = datetime(2026, 1, 5, 8)
        for metric, value in (("usage", 4.0), ("nominal_quota", 8.0)):
            con.execute("INSERT INTO kueue_queue_resources VALUES ('k8s', ?, ?, ?, 'c', 'cq', "
                        "'h100', 'nvidia.com/gpu', ?, ?, ?, 120)",
                        [metric, hour, datetime(2026, 1, 5, 9), value, value, value])
    with connect(db) as con:
        for table in (schema.KUEUE_QUEUE_RESOURCES, schema.KUEUE_PENDING):
            got = [r[0] for r in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = ? "
                "ORDER BY column_index", [table.name]).fetchall()]
            assert got == table.column_names
        assert con.execute("SELECT sum(mean) FROM kueue_queue_resources").fetchone()[0] == 12.0
        build_kueue_quota(con, date(2026, 1, 5), date(2026, 1, 5))
        rows = con.execute("SELECT count(*), count(*) FILTER (WHERE known), "
                           "count(quota_used_share) FROM kueue_quota_hourly").fetchone()
    assert rows == (48, 0, 0)  # 24 hours x (queue, cohort), none known
