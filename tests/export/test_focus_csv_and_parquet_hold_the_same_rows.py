"""The CSV and the Parquet file of one period hold the same rows: every column, every value (times
as UTC instants, costs as exact decimals, nulls as nulls)."""

from pathlib import Path

import duckdb

from models.focus import ALL_COLUMNS
from tests.export.conftest import LateWorld, export


def _as_text(con: duckdb.DuckDBPyConnection, source: str) -> list[tuple]:
    con.execute("SET TimeZone = 'UTC'")
    columns = con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
    assert [c[0] for c in columns] == list(ALL_COLUMNS)
    parts = []
    for name, kind, *_ in columns:
        if "TIMESTAMP" in kind:
            parts.append(f"strftime(\"{name}\", '%Y-%m-%dT%H:%M:%SZ')")
        elif kind.startswith("DECIMAL") or kind in ("DOUBLE", "BIGINT", "INTEGER"):
            parts.append(f"CAST(\"{name}\" AS DECIMAL(38, 13))")
        else:
            parts.append(f"CAST(\"{name}\" AS VARCHAR)")
    return con.execute(f"SELECT {', '.join(parts)} FROM {source} ORDER BY ALL").fetchall()


def test_csv_and_parquet_of_a_month_with_corrections_hold_the_same_rows(
        late_world: LateWorld, tmp_path: Path):
    with duckdb.connect(str(late_world.db), read_only=True) as con:
        csv_file = export(con, "2026-01", tmp_path / "m.csv").files[0]
        parquet = export(con, "2026-01", tmp_path / "m.parquet", "parquet").files[0]
    with duckdb.connect() as con:
        # every column of the CSV as text, typed as the parquet's types would be
        from_parquet = _as_text(con, f"read_parquet('{parquet}')")
        types = {n: t for n, t, *_ in
                 con.execute(f"DESCRIBE SELECT * FROM read_parquet('{parquet}')").fetchall()}
        csv_types = ", ".join(
            f"'{n}': '{'VARCHAR' if 'TIMESTAMP' in t else t}'" for n, t in types.items())
        con.execute(f"CREATE TEMP TABLE c AS SELECT * FROM read_csv('{csv_file}', header = true, "
                    f"columns = {{{csv_types}}})")
        for n, t in types.items():
            if "TIMESTAMP" in t:
                con.execute(f"ALTER TABLE c ALTER \"{n}\" TYPE TIMESTAMPTZ USING "
                            f"strptime(\"{n}\", '%Y-%m-%dT%H:%M:%SZ')::TIMESTAMP "
                            "AT TIME ZONE 'UTC'")
        from_csv = _as_text(con, "c")
    assert len(from_csv) > 1000
    assert any(r[ALL_COLUMNS.index("ChargeClass")] == "Correction" for r in from_csv)
    assert from_csv == from_parquet
