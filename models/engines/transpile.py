"""DuckDB SQL of ``models/sql`` as Spark SQL: SQLGlot's transpiler plus the project's rewrites.

``sqlglot.transpile(sql, read="duckdb", write="spark")`` parses every model, but some of what it
writes means something else on Spark (or is no Spark function at all). Each rewrite below keeps
the DuckDB 1.5 meaning, figure for figure:

* ``epoch(a - b)`` (seconds of an interval, DOUBLE): SQLGlot writes ``UNIX_TIMESTAMP(a - b)``.
  DuckDB holds ``a - b`` as days + microseconds and returns ``days * 86400 + micros / 1e6``;
  the rewrite computes the same two parts from ``timestampdiff(MICROSECOND, b, a)``.
* ``to_microseconds(n)``, ``to_seconds(x)`` (and milli/minutes/hours/days): left as they are by
  SQLGlot (no Spark functions): ``n * INTERVAL '1' MICROSECOND`` (exact day-time intervals).
* ``date_diff('second', a, b)``: DuckDB counts unit boundaries crossed, Spark's ``DATEDIFF`` /
  ``timestampdiff`` whole units elapsed (they differ when a timestamp has a fraction): both ends
  are truncated to the unit first.
* ``a / b``: DuckDB 1.5 divides as DOUBLE whatever the operands (DECIMAL included); Spark keeps
  DECIMAL / DECIMAL a DECIMAL (rounded to its own scale): both sides are cast to DOUBLE.
* ``CAST(x AS BIGINT)`` (any integer type): DuckDB rounds a DOUBLE half to even and a DECIMAL
  half away from zero, Spark truncates both: ``bround`` / ``round`` first, by ``typeof(x)``.
* ``round(x, n)`` of a DOUBLE (a division, an average, a cast to DOUBLE, arithmetic on them):
  DuckDB computes ``std::round(x * 10^n) / 10^n`` in binary, Spark rounds the shortest decimal
  of ``x`` half up (1.255, held as 1.25499..., is 1.25 on DuckDB, 1.26 on Spark): the rewrite is
  DuckDB's formula. Other ``round`` arguments (DECIMAL rounding agrees) are left as they are.
* ``len(list)``: SQLGlot writes ``LENGTH`` (a string's length on Spark): ``SIZE``. The heavy
  models call ``len`` on lists only.
* ``string_agg(DISTINCT x, sep ORDER BY x)``: ``array_join(array_sort(collect_set(x)), sep)``.
* ``list(DISTINCT x)``: ``collect_set(x)``.
* ``arg_min(x, k)`` / ``arg_max(x, k)``: DuckDB skips the rows whose ``x`` (or ``k``) is NULL
  (``arg_min_null`` is the one that does not), Spark's ``MIN_BY`` / ``MAX_BY`` return the NULL
  of the first row: ``FILTER (WHERE x IS NOT NULL AND k IS NOT NULL)``, added to a FILTER the
  aggregate has. As a window function (Spark has no FILTER there) it is refused.
* ``$name`` parameters: inlined as typed literals (TIMESTAMP_NTZ, DATE, BIGINT, DOUBLE, STRING):
  DuckDB's TIMESTAMP is naive UTC, Spark's TIMESTAMP_NTZ the same.

``* EXCLUDE (c)`` needs none (SQLGlot writes ``* EXCEPT (c)``, which Spark 4 reads). What has no
rewrite (ASOF joins, ``* REPLACE``) is refused with an error naming it, never passed on to fail
or mean something else on the cluster.
"""

import re
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal

import sqlglot
from sqlglot import exp

_PARAMETER = re.compile(r"\$([a-z_][a-z0-9_]*)")
_MICROS_PER_DAY = 86_400_000_000
_INTEGER_TYPES = {exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT,
                  exp.DataType.Type.BIGINT}
# DuckDB interval constructors -> the Spark interval of one unit they multiply
_INTERVAL_FUNCTIONS = {
    "TO_MICROSECONDS": "MICROSECOND",
    "TO_MILLISECONDS": "MILLISECOND",
    "TO_SECONDS": "SECOND",
    "TO_MINUTES": "MINUTE",
    "TO_HOURS": "HOUR",
    "TO_DAYS": "DAY",
}


class UnsupportedSql(ValueError):
    """SQL the Spark engine cannot run with the same meaning."""


def parameter_names(sql: str) -> set[str]:
    """The ``$parameters`` ``sql`` names (comments included: a harmless over-approximation)."""
    return set(_PARAMETER.findall(sql))


def literal(value: object) -> exp.Expr:
    """``value`` as a typed Spark literal (what DuckDB binds a Python value as)."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            msg = f"expected a naive UTC datetime parameter, found {value!r}"
            raise UnsupportedSql(msg)
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), "TIMESTAMP_NTZ")
    if isinstance(value, date):
        return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
    if isinstance(value, int):
        return exp.cast(exp.Literal.number(value), "BIGINT")
    if isinstance(value, float):
        return exp.cast(exp.Literal.string(repr(value)), "DOUBLE")
    if isinstance(value, Decimal):
        return exp.Literal.number(str(value))
    if isinstance(value, str):
        return exp.Literal.string(value)
    msg = ("expected a None, bool, int, float, Decimal, str, date or datetime parameter, "
           f"found {value!r}")
    raise UnsupportedSql(msg)


def tables_read(sql: str) -> set[str]:
    """The tables and views ``sql`` reads: every table name minus its own CTEs' names."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    return {t.name for t in tree.find_all(exp.Table) if t.name and t.name not in ctes}


def _call(name: str, *args: exp.Expr) -> exp.Expr:
    """A Spark function call written as is (SQLGlot's own classes reorder some arguments)."""
    return exp.Anonymous(this=name, expressions=list(args))


def _unit_interval(unit: str) -> exp.Expr:
    return exp.Interval(this=exp.Literal.string("1"), unit=exp.Var(this=unit))


def _micros_between(start: exp.Expr, end: exp.Expr) -> exp.Expr:
    return _call("TIMESTAMPDIFF", exp.Var(this="MICROSECOND"), start.copy(), end.copy())


def _epoch(node: exp.TimeToUnix) -> exp.Expr:
    arg = node.this
    if not isinstance(arg, exp.Sub):
        # epoch(timestamp): seconds since 1970 of a naive UTC timestamp
        return exp.Div(
            this=exp.cast(_call("UNIX_MICROS", exp.cast(arg.copy(), "TIMESTAMP_LTZ")),
                          "DOUBLE"),
            expression=exp.Literal.number(1_000_000))
    micros = _micros_between(arg.expression, arg.this)  # a - b: from b to a
    days = exp.IntDiv(this=micros, expression=exp.Literal.number(_MICROS_PER_DAY))
    rest = exp.Mod(this=micros.copy(), expression=exp.Literal.number(_MICROS_PER_DAY))
    return exp.Paren(this=exp.Add(
        this=exp.cast(exp.Mul(this=exp.Paren(this=days), expression=exp.Literal.number(86400)),
                      "DOUBLE"),
        expression=exp.Div(this=exp.cast(exp.Paren(this=rest), "DOUBLE"),
                           expression=exp.Literal.number(1_000_000))))


def _integer_cast(node: exp.Cast) -> exp.Expr:
    value = node.this
    kind = _call("TYPEOF", value.copy())
    floating = exp.In(this=kind, expressions=[exp.Literal.string("double"),
                                              exp.Literal.string("float")])
    rounded = exp.Case(ifs=[exp.If(this=floating, true=_call("BROUND", value.copy()))],
                       default=_call("ROUND", value.copy()))
    return exp.Cast(this=rounded, to=node.to.copy())


def _is_double(node: exp.Expr) -> bool:
    """Whether DuckDB types ``node`` DOUBLE, as far as the expression alone tells."""
    if isinstance(node, exp.Paren):
        return _is_double(node.this)
    if isinstance(node, exp.Div | exp.Avg):
        return True
    if isinstance(node, exp.Cast):
        return node.to.this in {exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT}
    if isinstance(node, exp.Mul | exp.Add | exp.Sub):
        return _is_double(node.this) or _is_double(node.expression)
    return False


def _double_round(node: exp.Round) -> exp.Expr:
    digits = node.args["decimals"]
    if not (isinstance(digits, exp.Literal) and digits.is_int and int(digits.this) >= 0):
        msg = f"expected round(x, n) with a whole number n >= 0, found {node.sql('duckdb')}"
        raise UnsupportedSql(msg)
    modifier = exp.cast(exp.Literal.string(repr(10.0 ** int(digits.this))), "DOUBLE")
    scaled = exp.Mul(this=exp.Paren(this=node.this), expression=modifier)
    return exp.Paren(this=exp.Div(this=_call("ROUND", scaled, exp.Literal.number(0)),
                                  expression=modifier.copy()))


def _date_diff(node: exp.DateDiff) -> exp.Expr:
    unit = (node.unit.name if node.unit else "DAY").upper()
    if unit not in {"MICROSECOND", "MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY"}:
        msg = f"expected date_diff in microseconds .. days, found unit {unit!r}"
        raise UnsupportedSql(msg)
    if unit == "MICROSECOND":
        return _micros_between(node.expression, node.this)
    start, end = (_call("DATE_TRUNC", exp.Literal.string(unit), e.copy())
                  for e in (node.expression, node.this))
    return _call("TIMESTAMPDIFF", exp.Var(this=unit), start, end)


def _string_agg(node: exp.GroupConcat) -> exp.Expr:
    this, separator = node.this, node.args.get("separator") or exp.Literal.string(",")
    order = None
    if isinstance(this, exp.Order):
        order, this = this, this.this
    distinct = isinstance(this, exp.Distinct)
    value = this.expressions[0] if distinct else this
    keys = [o.this for o in order.expressions] if order else []
    if not distinct or (keys and (len(keys) > 1 or keys[0] != value)) or (
            order and order.expressions[0].args.get("desc")):
        msg = ("expected string_agg(DISTINCT x, sep [ORDER BY x]) (the form with a Spark "
               f"twin), found {node.sql('duckdb')}")
        raise UnsupportedSql(msg)
    return _call("ARRAY_JOIN", _call("ARRAY_SORT", _call("COLLECT_SET", value.copy())),
                    separator.copy())


_ARG_MIN_MAX = (exp.ArgMin, exp.ArgMax)


def _not_nulls(node: exp.Expr) -> exp.Expr:
    """``x IS NOT NULL AND k IS NOT NULL`` of ``arg_min(x, k)``: the rows DuckDB reads."""
    return exp.and_(*(exp.Not(this=exp.Is(this=e.copy(), expression=exp.Null()))
                      for e in (node.this, node.expression)))


def _arg_min_max(node: exp.Expr) -> exp.Expr:
    if isinstance(node.parent, exp.Window):
        msg = (f"expected {node.sql('duckdb')} as an aggregate (Spark has no FILTER on a "
               "window function to skip NULL values as DuckDB does), found it in a window")
        raise UnsupportedSql(msg)
    if isinstance(node.parent, exp.Filter):
        return node  # its FILTER takes the condition (below)
    return exp.Filter(this=node.copy(), expression=exp.Where(this=_not_nulls(node)))


def _filtered_arg_min_max(node: exp.Filter) -> exp.Expr:
    where = node.expression
    return exp.Filter(this=node.this.copy(), expression=exp.Where(this=exp.and_(
        exp.Paren(this=where.this.copy()), _not_nulls(node.this))))


def _refuse(node: exp.Expr) -> None:
    if isinstance(node, exp.Join) and str(node.args.get("method") or "").upper() == "ASOF":
        msg = f"expected no ASOF join (Spark SQL has none), found {node.sql('duckdb')[:80]}"
        raise UnsupportedSql(msg)
    if isinstance(node, exp.Star) and node.args.get("replace"):
        msg = ("expected no SELECT * REPLACE (list the columns: Spark SQL has none), found "
               f"{node.sql('duckdb')}")
        raise UnsupportedSql(msg)


def _rewrite(node: exp.Expr, params: Mapping[str, object]) -> exp.Expr:
    _refuse(node)
    if isinstance(node, exp.Placeholder) and node.name:
        if node.name not in params:
            msg = f"expected a value for the parameter ${node.name}, found none"
            raise UnsupportedSql(msg)
        return literal(params[node.name])
    if isinstance(node, exp.Div):
        return exp.Div(this=exp.cast(node.this, "DOUBLE"), expression=exp.cast(
            node.expression, "DOUBLE"))
    if isinstance(node, exp.TimeToUnix):
        return _epoch(node)
    if isinstance(node, exp.Cast) and node.to.this in _INTEGER_TYPES and not isinstance(
            node.this, exp.Literal | exp.Null):
        return _integer_cast(node)
    if isinstance(node, exp.Anonymous) and node.name.upper() in _INTERVAL_FUNCTIONS:
        (amount,) = node.expressions
        return exp.Paren(this=exp.Mul(
            this=exp.Paren(this=amount), expression=_unit_interval(
                _INTERVAL_FUNCTIONS[node.name.upper()])))
    if isinstance(node, exp.DateDiff):
        return _date_diff(node)
    if isinstance(node, exp.Round) and node.args.get("decimals") is not None and _is_double(
            node.this):
        return _double_round(node)
    if isinstance(node, exp.Length):
        return _call("SIZE", node.this)
    if isinstance(node, exp.GroupConcat):
        return _string_agg(node)
    if isinstance(node, _ARG_MIN_MAX):
        return _arg_min_max(node)
    if isinstance(node, exp.Filter) and isinstance(node.this, _ARG_MIN_MAX):
        return _filtered_arg_min_max(node)
    if isinstance(node, exp.ArrayAgg) and isinstance(node.this, exp.Distinct):
        return _call("COLLECT_SET", node.this.expressions[0])
    return node


def to_spark(sql: str, params: Mapping[str, object]) -> str:
    """``sql`` (one DuckDB SELECT of models/sql) as Spark SQL with the same result, the
    ``$parameters`` inlined from ``params`` as typed literals."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    # bottom-up: a rewrite sees its operands already rewritten (a Div it builds is final)
    return _transform_bottom_up(tree, params).sql(dialect="spark")


def _transform_bottom_up(tree: exp.Expr, params: Mapping[str, object]) -> exp.Expr:
    """Rewrite every node after its children (post-order), each node once."""
    for node in list(tree.dfs(prune=None))[::-1]:  # children before parents
        if node is tree:
            continue
        new = _rewrite(node, params)
        if new is not node:
            node.replace(new)
    return _rewrite(tree, params)
