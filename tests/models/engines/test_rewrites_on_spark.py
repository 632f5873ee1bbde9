"""Each rewrite of models/engines/transpile.py gives DuckDB's figures on Spark: the same SQL made
into a temp table by the DuckDB engine and by the Spark engine, over values where DuckDB and
Spark disagree without the rewrite (timestamps with fractions, intervals over a day and negative,
halves, decimals, empty and NULL lists)."""

from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from models import load_sql
from models.engines import DUCKDB_ENGINE
from models.engines.spark import SparkEngine
from models.lake import lake_table_glob
from models.runner import ensure_schema

pytestmark = pytest.mark.spark

VALUES = """
CREATE TABLE v AS SELECT * FROM (VALUES
  (1, TIMESTAMP '2026-01-05 10:00:00.900000', TIMESTAMP '2026-01-05 10:00:01.100000',
   2.5::DOUBLE, 2.5::DECIMAL(18, 6), 3::DECIMAL(18, 6), 7, 2, ['g1', 'g2'], 'b', 'g2'),
  (2, TIMESTAMP '2026-01-07 23:59:59.999999', TIMESTAMP '2026-01-05 00:00:00.000001',
   3.5::DOUBLE, -2.5::DECIMAL(18, 6), 7::DECIMAL(18, 6), -7, 3, [], 'a', 'g1'),
  (3, TIMESTAMP '2026-01-05 08:00:00', TIMESTAMP '2026-01-05 09:00:00',
   -2.5::DOUBLE, 1.7::DECIMAL(18, 6), 0.3::DECIMAL(18, 6), 1, 3, NULL, 'b', 'g1'),
  (4, TIMESTAMP '2026-01-05 08:00:00.5', TIMESTAMP '2026-01-05 07:59:59.25',
   2.7::DOUBLE, -1.7::DECIMAL(18, 6), 1::DECIMAL(18, 6), 5, 4, ['g3'], 'c', 'g3')
) AS t(k, a, b, x, d, d2, i, j, l, n, g)
"""
ROWS = """
SELECT
    k,
    epoch(a - b) AS epoch_of_interval,
    epoch(b - a) AS epoch_of_negative_interval,
    a + to_microseconds(i * 1000001) AS plus_micros,
    a + to_seconds(i) AS plus_seconds,
    date_diff('second', a, b) AS second_boundaries,
    date_diff('minute', b, a) AS minute_boundaries,
    date_diff('hour', a, b) AS hour_boundaries,
    d / d2 AS decimal_division,
    i / j AS integer_division,
    x / 60.0 AS by_decimal_literal,
    round(i * 4518 / 3600.0, 2) AS rounded_division,
    CAST(x AS BIGINT) AS double_to_bigint,
    CAST(d AS BIGINT) AS decimal_to_bigint,
    CAST(x * 1000000 AS BIGINT) AS micros,
    len(l) AS list_length,
    coalesce(len(l), 0) AS list_length_or_zero,
    a >= $from_ts AS after_parameter,
    $threshold * x AS times_double_parameter
FROM v
"""
GROUPS = """
SELECT n, string_agg(DISTINCT g, ';' ORDER BY g) AS gs, list_sort(list(DISTINCT g)) AS gl,
       count(*) AS rows,
       -- the row of the least key holds a NULL list for n = 'b': DuckDB skips it
       arg_min(l, -k) AS first_list, arg_max(l, k) FILTER (WHERE i > 0) AS last_list
FROM v
GROUP BY n
"""
EXCLUDE = "SELECT * EXCLUDE (l, d, d2) FROM v"
PARAMS = {"from_ts": datetime(2026, 1, 5, 8, 0, 0, 500000), "threshold": 0.1}


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(VALUES)
    return con


@pytest.mark.parametrize(("sql", "key"), [(ROWS, "k"), (GROUPS, "n"), (EXCLUDE, "k")],
                         ids=["row functions", "aggregates", "star exclude"])
def test_spark_gives_the_figures_duckdb_gives(spark, con: duckdb.DuckDBPyConnection,
                                               tmp_path: Path, sql: str, key: str) -> None:
    engine = SparkEngine(spark, tmp_path)
    DUCKDB_ENGINE.create_temp(con, "on_duckdb", sql, PARAMS)
    engine.create_temp(con, "on_spark", sql, PARAMS)
    duck = con.execute(f"SELECT * FROM on_duckdb ORDER BY {key}").fetchall()
    ours = con.execute(f"SELECT * FROM on_spark ORDER BY {key}").fetchall()
    assert con.execute("DESCRIBE on_spark").fetchall() == con.execute(
        "DESCRIBE on_duckdb").fetchall()
    assert ours == duck
    engine.drop_temps(con, ["on_spark"])
    assert not list(tmp_path.iterdir())  # the run's scratch is gone


def test_a_lake_source_is_read_by_spark_not_exported_from_duckdb(spark, tmp_path: Path) -> None:
    """gpu_utilization from Hive partitions (cluster=, day=; a cluster named like a number, a
    NULL gpu_instance, a span across midnight): usage_samples as the DuckDB engine makes it."""
    con = duckdb.connect()
    ensure_schema(con)
    con.execute("""
        INSERT INTO gpu_utilization BY NAME
        SELECT c.cluster, 'GPU-' || g AS gpu_uuid, CASE WHEN g = 1 THEN '1g.10gb' END
                   AS gpu_instance, 'node-' || g AS node, g AS gpu_index,
               TIMESTAMP '2026-01-05 23:50:00' + to_minutes(m) AS bucket_start,
               (m % 7) / 7.0 AS busy_fraction, 1 + m % 2 AS samples, 'ns' AS namespace,
               'pod-' || g AS pod, 'main' AS container, NULL AS pod_uid, NULL AS hpc_job
        FROM (VALUES ('1'), ('gpulab')) AS c(cluster), range(2) AS r(g), range(25) AS s(m)
        WHERE m <> 12""")
    root = tmp_path / "ledger.lake"
    root.mkdir()
    con.execute("COPY (SELECT *, CAST(bucket_start AS DATE) AS day FROM gpu_utilization) "
                f"TO '{root / 'gpu_utilization'}' (FORMAT parquet, PARTITION_BY (cluster, day))")
    params = {"from_ts": datetime(2026, 1, 5, 23), "to_ts": datetime(2026, 1, 7)}
    sql = load_sql("gpu_usage_hourly_samples")
    engine = SparkEngine(spark, tmp_path / "scratch",
                         sources={"gpu_utilization": lake_table_glob(root, "gpu_utilization")})
    DUCKDB_ENGINE.create_temp(con, "on_duckdb", sql, params)
    engine.create_temp(con, "on_spark", sql, params)
    exported = {p.name for p in (tmp_path / "scratch").rglob("*.parquet") if p.parent.name == "in"}
    assert "gpu_utilization.parquet" not in exported
    order = "ORDER BY cluster, gpu_uuid, span_start"
    duck = con.execute(f"SELECT * FROM on_duckdb {order}").fetchall()
    assert len(duck) == 2 * 2 * 24
    assert con.execute(f"SELECT * FROM on_spark {order}").fetchall() == duck
    engine.drop_temps(con, ["on_spark"])
