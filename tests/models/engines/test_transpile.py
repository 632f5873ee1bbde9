"""models/engines/transpile.py without Spark: every rewrite is in the SQL Spark gets, the heavy
models come out with no DuckDB-only construct, and what cannot be rewritten is refused."""

from datetime import date, datetime

import pytest
import sqlglot
from sqlglot import exp

from models import load_sql
from models.engines.transpile import UnsupportedSql, tables_read, to_spark

# the models the Spark engine runs (models/build.py USAGE_TABLES and the temps before them,
# models/incidents.py HEAVY_DETECTORS), with the parameters their callers give
DAYS = {"first_day": date(2026, 1, 5), "end_day": date(2026, 1, 6)}
SCAN = {"scan_start": datetime(2026, 1, 4), "scan_end": datetime(2026, 1, 7),
        "scan_first": date(2026, 1, 4), "scan_last": date(2026, 1, 6),
        "tolerance_seconds": 60, "efficiency_coverage": 0.9, "window_rule": True}
HEAVY = {
    "gpu_usage_hourly_samples": {"from_ts": datetime(2026, 1, 4, 23),
                                 "to_ts": datetime(2026, 1, 6, 1)},
    "gpu_usage_span_matches": DAYS,
    "gpu_usage_hourly_matched": {},
    "gpu_usage_hourly_allocations": DAYS,
    "gpu_usage_hourly": DAYS,
    "node_usage_hourly": DAYS,
    "gpu_usage_daily": DAYS,
    "node_usage_daily": DAYS,
    "detect_double_gpu": SCAN,
    "detect_idle": SCAN,
    "detect_low_efficiency": SCAN,
}
DUCKDB_ONLY = ("UNIX_TIMESTAMP", "TO_MICROSECONDS", "TO_SECONDS", "LENGTH(", "LISTAGG",
               "DATEDIFF(", "ASOF", ":first_day", ":scan_start")


@pytest.mark.parametrize("model", sorted(HEAVY))
def test_heavy_models_come_out_as_spark_sql_without_duckdb_only_constructs(model: str) -> None:
    spark_sql = to_spark(load_sql(model), HEAVY[model])
    for construct in DUCKDB_ONLY:
        assert construct not in spark_sql.upper(), construct
    sqlglot.parse_one(spark_sql, read="spark")  # well-formed Spark SQL


def _inlined_table_reads(sql: str) -> int:
    """How many table reads ``sql`` plans once every CTE reference is replaced by the CTE's
    body, as Spark does with every CTE it is given (DuckDB may read a CTE once)."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    bodies = {c.alias_or_name: c.this for c in tree.find_all(exp.CTE)}
    reads: dict[str, int] = {}

    def count(tables: list[exp.Table]) -> int:
        return sum(cte(t.name) if t.name in bodies else 1 for t in tables)

    def cte(name: str) -> int:
        if name not in reads:
            reads[name] = count(list(bodies[name].find_all(exp.Table)))
        return reads[name]

    return count([t for t in tree.find_all(exp.Table) if t.find_ancestor(exp.CTE) is None])


@pytest.mark.parametrize("model", sorted(HEAVY))
def test_heavy_models_stay_small_once_spark_inlines_their_ctes(model: str) -> None:
    """A CTE read twice is planned twice on Spark, and so is everything it reads: a chain of
    such CTEs multiplies (a first port of detect_idle, its CTEs read as on DuckDB, read its
    tables thousands of times: a plan of 14,616 nodes, a minute to optimize, the driver out of
    heap)."""
    assert _inlined_table_reads(load_sql(model)) <= 100


def test_inlined_table_reads_multiply_along_ctes_read_twice() -> None:
    sql = ("WITH a AS (SELECT * FROM t), b AS (SELECT * FROM a UNION ALL SELECT * FROM a), "
           "c AS (SELECT * FROM b JOIN b AS b2 USING (k)) SELECT * FROM c JOIN u USING (k)")
    assert _inlined_table_reads(sql) == 2 * 2 + 1


def test_epoch_of_an_interval_is_days_and_microseconds_of_timestampdiff() -> None:
    out = to_spark("SELECT epoch(a - b) FROM t", {})
    assert "UNIX_TIMESTAMP" not in out
    assert "TIMESTAMPDIFF(MICROSECOND, b, a) DIV 86400000000" in out
    assert "TIMESTAMPDIFF(MICROSECOND, b, a) % 86400000000" in out


def test_interval_functions_multiply_a_one_unit_interval() -> None:
    out = to_spark("SELECT ts + to_microseconds(n), ts + to_seconds(s) FROM t", {})
    assert "(n) * INTERVAL '1' MICROSECOND" in out
    assert "(s) * INTERVAL '1' SECOND" in out


def test_date_diff_truncates_both_ends_so_it_counts_boundaries() -> None:
    out = to_spark("SELECT date_diff('second', a, b) FROM t", {})
    assert out == ("SELECT TIMESTAMPDIFF(SECOND, DATE_TRUNC('SECOND', a), "
                   "DATE_TRUNC('SECOND', b)) FROM t")


def test_division_is_double_division_as_in_duckdb() -> None:
    assert to_spark("SELECT a / b FROM t", {}) == (
        "SELECT CAST(a AS DOUBLE) / CAST(b AS DOUBLE) FROM t")


def test_integer_casts_round_as_duckdb_does() -> None:
    out = to_spark("SELECT CAST(x * 1000000 AS BIGINT), CAST(0 AS BIGINT) FROM t", {})
    assert "THEN BROUND(x * 1000000) ELSE ROUND(x * 1000000)" in out
    assert out.endswith("CAST(0 AS BIGINT) FROM t")


def test_round_of_a_double_is_duckdbs_binary_formula() -> None:
    out = to_spark("SELECT round(s / 3600.0, 2), round(d, 2) FROM t", {})
    assert out == ("SELECT (ROUND((CAST(s AS DOUBLE) / CAST(3600.0 AS DOUBLE)) * "
                   "CAST('100.0' AS DOUBLE), 0) / CAST('100.0' AS DOUBLE)), ROUND(d, 2) FROM t")


def test_len_of_a_list_is_size() -> None:
    assert to_spark("SELECT len(l) FROM t", {}) == "SELECT SIZE(l) FROM t"


def test_distinct_lists_and_ordered_string_agg_use_collect_set() -> None:
    out = to_spark("SELECT list_sort(list(DISTINCT g)), string_agg(DISTINCT n, ';' ORDER BY n) "
                   "FROM t", {})
    assert out == ("SELECT ARRAY_SORT(COLLECT_SET(g)), ARRAY_JOIN(ARRAY_SORT(COLLECT_SET(n)), "
                   "';') FROM t")


def test_string_agg_in_another_order_is_refused() -> None:
    with pytest.raises(UnsupportedSql, match="expected string_agg"):
        to_spark("SELECT string_agg(n, ';' ORDER BY m) FROM t", {})


def test_parameters_are_inlined_as_typed_literals() -> None:
    out = to_spark("SELECT $ts, $d, $n, $f, $s, $b", {
        "ts": datetime(2026, 1, 5, 1, 2, 3, 4), "d": date(2026, 1, 5), "n": 60, "f": 0.9,
        "s": "it's", "b": True})
    assert out == ("SELECT CAST('2026-01-05 01:02:03.000004' AS TIMESTAMP_NTZ), "
                   "CAST('2026-01-05' AS DATE), CAST(60 AS BIGINT), CAST('0.9' AS DOUBLE), "
                   "'it\\'s', TRUE")


def test_a_missing_parameter_is_an_error() -> None:
    with pytest.raises(UnsupportedSql, match=r"expected a value for the parameter \$d"):
        to_spark("SELECT $d", {})


def test_a_zoned_datetime_parameter_is_refused() -> None:
    from datetime import UTC
    with pytest.raises(UnsupportedSql, match="naive UTC"):
        to_spark("SELECT $ts", {"ts": datetime(2026, 1, 5, tzinfo=UTC)})


def test_asof_joins_are_refused() -> None:
    with pytest.raises(UnsupportedSql, match="ASOF"):
        to_spark("SELECT * FROM a ASOF JOIN b ON a.k = b.k AND a.t >= b.t", {})


@pytest.mark.parametrize("sql", ["SELECT * REPLACE (1 AS x) FROM t",
                                 "SELECT t.* REPLACE (1 AS x) FROM t"])
def test_star_replace_is_refused(sql: str) -> None:
    with pytest.raises(UnsupportedSql, match=r"\* REPLACE"):
        to_spark(sql, {})


def test_tables_read_are_the_tables_minus_the_ctes() -> None:
    assert tables_read(load_sql("gpu_usage_span_matches")) == {
        "allocations", "slurm_runs", "usage_samples"}
    assert tables_read(load_sql("gpu_usage_hourly_matched")) == {"usage_span_matches"}
    assert tables_read(load_sql("detect_low_efficiency")) == {
        "gpu_utilization", "allocations", "slurm_node_allocations", "idle_policy", "det_idle",
        "det_double", "det_gang", "gpu_busy_daily"}


def test_arg_min_and_max_skip_null_values_as_in_duckdb() -> None:
    spark_sql = to_spark("SELECT arg_min(x, k) AS a, arg_max(x, k) FILTER (WHERE y > 1) AS b "
                         "FROM t", {})
    assert "MIN_BY(x, k) FILTER(WHERE NOT x IS NULL AND NOT k IS NULL) AS a" in spark_sql
    assert "MAX_BY(x, k) FILTER(WHERE (y > 1) AND (NOT x IS NULL AND NOT k IS NULL)) AS b" \
        in spark_sql


def test_arg_min_as_a_window_function_is_refused() -> None:
    with pytest.raises(UnsupportedSql, match=r"expected ARG_MIN.* as an aggregate"):
        to_spark("SELECT arg_min(x, k) OVER (PARTITION BY z) FROM t", {})
