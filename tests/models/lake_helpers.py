"""Shared by the lake tests: a small utilization frame, and the lake read three ways."""

from datetime import date, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds

from models import schema
from models.lake import LAKE_TABLES, LakeTable, lake_root, lake_table_glob, select_columns
from models.runner import read_snapshot

_POLARS = {"VARCHAR": pl.String, "INTEGER": pl.Int32, "BIGINT": pl.Int64, "DOUBLE": pl.Float64,
           "TIMESTAMP": pl.Datetime("us")}


def utilization(cluster: str, day: date, busy: float, gpus: int = 2, minutes: int = 30
                ) -> pl.DataFrame:
    """``gpus`` x ``minutes`` rows of gpu_utilization on ``day``, every busy_fraction ``busy``."""
    start = datetime.combine(day, datetime.min.time())
    rows = [{"cluster": cluster, "gpu_uuid": f"GPU-{g}", "node": "n1", "gpu_index": g,
             "gpu_model": "a100", "bucket_start": start + timedelta(minutes=m),
             "busy_fraction": busy, "samples": 4, "metric": "DCGM_FI_PROF_GR_ENGINE_ACTIVE"}
            for g in range(gpus) for m in range(minutes)]
    frame = pl.DataFrame(rows)
    types = dict(schema.GPU_UTILIZATION.columns)
    return frame.select([
        (pl.col(c) if c in frame.columns else pl.lit(None)).cast(_POLARS[types[c]]).alias(c)
        for c in schema.GPU_UTILIZATION.column_names])


def _differences(con: duckdb.DuckDBPyConnection, lake: LakeTable, other: str) -> int:
    cols = ", ".join(f'"{c}"' for c in lake.table.column_names)
    mine = f"SELECT {cols} FROM {lake.name}"
    theirs = f"SELECT {cols} FROM {other}"
    return con.execute(f"SELECT count(*) FROM (({mine} EXCEPT ALL {theirs}) UNION ALL "
                       f"({theirs} EXCEPT ALL {mine}))").fetchone()[0]


def lake_differences(db: Path) -> dict[str, dict[str, int]]:
    """Per lake table, rows differing between the ledger and each way of reading the lake:
    the published snapshot (confined reader), DuckDB over the Hive layout, pyarrow.dataset
    over the Hive layout (as Spark or Trino would read it)."""
    root = lake_root(db)
    out: dict[str, dict[str, int]] = {}
    with duckdb.connect(str(db), read_only=True) as con, read_snapshot(db) as reader:
        for lake in LAKE_TABLES:
            served = reader.execute(f"SELECT * FROM {lake.name}").arrow()
            if isinstance(served, pa.RecordBatchReader):  # a stream (DuckDB 1.5): read it now
                served = served.read_all()
            con.register("_served", served)
            glob = lake_table_glob(root, lake.name).replace("'", "''")
            con.execute(
                f"CREATE OR REPLACE TEMP VIEW _hive AS SELECT {select_columns(lake)} FROM "
                f"read_parquet('{glob}', hive_partitioning = true, hive_types = "
                "{'cluster': VARCHAR, 'day': DATE})"
                if any(root.joinpath(lake.name).glob("*/*/*.parquet")) else
                f"CREATE OR REPLACE TEMP VIEW _hive AS SELECT * FROM {lake.name} WHERE false")
            table_dir = root / lake.name
            arrow = (ds.dataset(str(table_dir), format="parquet", partitioning="hive").to_table()
                     if table_dir.is_dir() else None)
            if arrow is not None and arrow.num_rows:
                con.register("_arrow_raw", arrow)
                con.execute(
                    "CREATE OR REPLACE TEMP VIEW _arrow AS SELECT * REPLACE ("
                    "CAST(day AS DATE) AS day, CAST(cluster AS VARCHAR) AS cluster) "
                    "FROM _arrow_raw")
            else:
                con.execute(
                    f"CREATE OR REPLACE TEMP VIEW _arrow AS SELECT * FROM {lake.name} WHERE false")
            out[lake.name] = {
                "rows": con.execute(f"SELECT count(*) FROM {lake.name}").fetchone()[0],
                "snapshot": _differences(con, lake, "_served"),
                "duckdb_hive": _differences(con, lake, "_hive"),
                "pyarrow_hive": _differences(con, lake, "_arrow"),
            }
            con.unregister("_served")
    return out


def part_stats(db: Path) -> dict[str, tuple[int, int]]:
    """Every Hive partition file: (inode, mtime in ns)."""
    root = lake_root(db)
    return {str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in root.glob("*/*/*/part-0.parquet")}
