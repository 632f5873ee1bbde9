"""The lake: the high-volume tables as Hive-partitioned Parquet beside the ledger.

Layout (``docs/storage.md``)::

    <ledger dir>/<ledger stem>.lake/
      <table>/cluster=<c>/day=<YYYY-MM-DD>/part-0.parquet   high-volume tables (Hive layout)
      <table>/part-0.parquet                                  the small tables, whole
      _catalog.parquet                                        one row per partition
      _versions/<table>/cluster=<c>/day=<d>/<id>.parquet      immutable partition files
      _staging/<pid>.<id>.parquet                             files being written

``part-0.parquet`` is a hard link to the partition's current file under ``_versions`` (names
starting with ``_`` are hidden from Hive, Spark, Trino and pyarrow discovery). Partition
columns are not inside the files; their values are escaped as Hive escapes path names, a NULL is
``__HIVE_DEFAULT_PARTITION__``.
"""

from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import pyarrow as pa

from models.schema import (
    ALLOCATION_USAGE_HOURLY,
    GPU_CONSERVATION_GPU_HOURLY,
    GPU_USAGE_HOURLY,
    GPU_UTILIZATION,
    K8S_POD_ALLOCATION_PIECES,
    K8S_POD_ALLOCATIONS,
    K8S_POD_PHASES,
    Table,
)

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
PART_FILE = "part-0.parquet"
CATALOG_FILE = "_catalog.parquet"
RETIRED_FILE = "_retired.parquet"
STAGING = "_staging"
VERSIONS = "_versions"


@dataclass(frozen=True)
class LakeTable:
    """A high-volume table kept as partitions (cluster, UTC day of ``day_column``)."""

    table: Table
    day_column: str  # a DATE column named day, or a TIMESTAMP whose UTC date is the day

    @property
    def name(self) -> str:
        return self.table.name

    @property
    def has_day(self) -> bool:
        """Whether ``day`` is a column of the table (else it exists only in the path)."""
        return self.day_column == "day"

    @property
    def file_columns(self) -> list[str]:
        """The columns inside a partition file: the table's, less cluster and day."""
        return [c for c in self.table.column_names if c not in ("cluster", "day")]

    def day_sql(self) -> str:
        """The partition day of a row, as SQL."""
        return '"day"' if self.has_day else f'CAST("{self.day_column}" AS DATE)'

    def days_sql(self, first: date, end: date) -> str:
        """Rows whose partition day is in ``[first, end)``: a range on the column itself, so
        DuckDB's zone maps skip the other row groups."""
        if self.has_day:
            return f"\"day\" >= DATE '{first}' AND \"day\" < DATE '{end}'"
        col = f'"{self.day_column}"'
        return f"{col} >= TIMESTAMP '{first}' AND {col} < TIMESTAMP '{end}'"

    def partition_sql(self, cluster: str | None, day: date | None) -> str:
        """The rows of one partition."""
        who = "cluster IS NULL" if cluster is None else f"cluster = {sql_string(cluster)}"
        if day is None:
            return f"{who} AND {self.day_sql()} IS NULL"
        return f"{who} AND {self.days_sql(day, day + timedelta(days=1))}"


LAKE_TABLES: tuple[LakeTable, ...] = (
    LakeTable(GPU_UTILIZATION, "bucket_start"),
    LakeTable(K8S_POD_ALLOCATIONS, "start_ts"),
    LakeTable(K8S_POD_ALLOCATION_PIECES, "start_ts"),
    LakeTable(K8S_POD_PHASES, "phase_ts"),
    LakeTable(ALLOCATION_USAGE_HOURLY, "day"),
    LakeTable(GPU_USAGE_HOURLY, "day"),
    LakeTable(GPU_CONSERVATION_GPU_HOURLY, "day"),  # a row per GPU and hour
)
LAKE_BY_NAME: dict[str, LakeTable] = {t.name: t for t in LAKE_TABLES}


def sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def lake_root(db_path: Path) -> Path:
    """The lake folder of the ledger ``db_path``."""
    return db_path.with_name(f"{db_path.stem}.lake")


def lake_table_glob(root: Path, table_name: str) -> str:
    """A glob of every partition file of ``table_name`` (read it with Hive partitioning)."""
    return str(root / table_name / "*" / "*" / "*.parquet")


#: Characters Hive (and Spark, Trino) escape in a partition value: FileUtils.escapePathName.
_HIVE_ESCAPED = frozenset([chr(c) for c in range(1, 0x20)]
                          + list('"#%\'*/:=?\\\x7f{[]^'))


def hive_escape(value: str | None) -> str:
    """``value`` as a Hive path segment value (``%XX`` for the characters Hive escapes, other
    characters, non-ASCII included, as they are; NULL and '' as the default partition)."""
    if value is None or value == "":
        return HIVE_NULL
    if "\x00" in value:
        msg = f"expected a partition value without NUL characters, found {value!r}"
        raise ValueError(msg)
    return "".join(f"%{ord(ch):02X}" if ch in _HIVE_ESCAPED else ch for ch in value)


def hive_unescape(segment: str) -> str | None:
    """The value of a path segment :func:`hive_escape` wrote."""
    if segment == HIVE_NULL:
        return None
    out, i = [], 0
    while i < len(segment):
        if segment[i] == "%" and _is_hex(segment[i + 1:i + 3]):
            out.append(chr(int(segment[i + 1:i + 3], 16)))
            i += 3
        else:
            out.append(segment[i])
            i += 1
    return "".join(out)


def _is_hex(text: str) -> bool:
    return len(text) == 2 and all(c in "0123456789abcdefABCDEF" for c in text)


def partition_relpath(table_name: str, cluster: str | None, day: date | None) -> str:
    """``<table>/cluster=<c>/day=<d>``, relative to the lake root."""
    return (f"{table_name}/cluster={hive_escape(cluster)}/"
            f"day={HIVE_NULL if day is None else day.isoformat()}")


def partition_paths(root: Path, table_name: str, first_day: date, last_day: date) -> list[Path]:
    """The partition files of ``table_name`` whose day is in ``first_day .. last_day``
    (inclusive), every cluster, as they are on disk now."""
    base = root / table_name
    if not base.is_dir():
        return []
    days = [first_day + timedelta(days=n) for n in range((last_day - first_day).days + 1)]
    found = []
    for cluster_dir in sorted(base.iterdir()):
        if not cluster_dir.name.startswith("cluster="):
            continue
        for day in days:
            path = cluster_dir / f"day={day.isoformat()}" / PART_FILE
            if path.is_file():
                found.append(path)
    return found


_ARROW_TYPES = {
    "VARCHAR": pa.string(), "JSON": pa.string(), "TIMESTAMP": pa.timestamp("us"),
    "DATE": pa.date32(), "DOUBLE": pa.float64(), "BIGINT": pa.int64(),
    "INTEGER": pa.int32(), "BOOLEAN": pa.bool_(), "SMALLINT": pa.int16(),
}


def arrow_type(duckdb_type: str) -> pa.DataType:
    """The Arrow type of a ledger column type (as DuckDB writes it to Parquet)."""
    name = duckdb_type.upper().strip()
    if name.startswith("DECIMAL(") and name.endswith(")"):
        precision, scale = (int(x) for x in name[len("DECIMAL("):-1].split(","))
        return pa.decimal128(precision, scale)
    if name.endswith("[]"):
        return pa.list_(arrow_type(name[:-2]))
    if name not in _ARROW_TYPES:
        msg = f"expected a column type of {sorted(_ARROW_TYPES)} or DECIMAL(p,s), found {name}"
        raise ValueError(msg)
    return _ARROW_TYPES[name]


def dataset_schema(lake_table: LakeTable) -> pa.Schema:
    """The schema of the table's partition files plus the partition columns."""
    types = dict(lake_table.table.columns)
    fields = [pa.field(c, arrow_type(types[c])) for c in lake_table.file_columns]
    return pa.schema([*fields, pa.field("cluster", pa.string()), pa.field("day", pa.date32())])


def select_columns(lake_table: LakeTable) -> str:
    """The table's columns in order with the ledger's types, over a Hive-partitioned read."""
    out = []
    for column, column_type in lake_table.table.columns:
        quoted = f'"{column}"'
        out.append(f"CAST({quoted} AS {column_type}) AS {quoted}"
                   if column_type.upper() == "JSON" else quoted)
    return ", ".join(out)


def empty_select(lake_table: LakeTable) -> str:
    """A typed SELECT of no rows: the table before it has any partition."""
    cols = ", ".join(f'CAST(NULL AS {t}) AS "{c}"' for c, t in lake_table.table.columns)
    return f"SELECT {cols} WHERE false"


def columns_signature(table: Table) -> str:
    """The columns and types: a partition written under another signature is rewritten."""
    return ",".join(f"{c} {t}" for c, t in table.columns)
