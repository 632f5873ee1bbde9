"""The heavy steps on Spark, from the same SQL files (``models/engines/transpile.py``).

A step's inputs: each table its SQL reads is, in this order, the result of an earlier step of
this run (a Spark view already), a table of ``sources`` (a Parquet path or Hive-partitioned glob,
e.g. the lake's: read by Spark directly, never through DuckDB), or else exported from the DuckDB
connection to scratch Parquet (temp tables and views included) once per run. A step's result is
written once to scratch Parquet, registered as a Spark view for the later steps, and read back by
DuckDB with the column types DuckDB itself gives that SQL (``DESCRIBE``), so that the DuckDB steps
after it, and the ledger rows an ``insert`` writes, are what the DuckDB engine makes.

An ``insert``'s rows are also this run's view of the table: a later step of the run that reads
that table reads the rows just written (the usage models read the days they rebuild only).
A run ends with ``drop_temps``: its views are dropped and its scratch folder removed.

Timestamps stay naive UTC: DuckDB's TIMESTAMP is Spark's TIMESTAMP_NTZ both ways through Parquet
(the session's time zone is UTC and its TIMESTAMP type TIMESTAMP_NTZ).
"""

import shutil
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

import duckdb
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from models.engines import bound, drop_temp
from models.engines.transpile import tables_read, to_spark
from models.lake import lake_root, lake_table_glob
from models.scalars import scalar
from models.schema import ALL_TABLES

# what DuckDB means, set on the session the engine is given (runtime SQL settings)
SESSION_SETTINGS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.timestampType": "TIMESTAMP_NTZ",
    "spark.sql.parquet.inferTimestampNTZ.enabled": "true",
    "spark.sql.legacy.sizeOfNull": "false",  # len(NULL) is NULL, not -1
    # a partition value is a string (a cluster named "1" stays "1"); cast by the ledger's types
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
}
_LEDGER = {t.name: t for t in ALL_TABLES}
#: Inputs read from the lake when the engine has one: the tables that grow with samples.
LAKE_INPUTS = frozenset({"gpu_utilization"})
_GLOB = ("*", "?", "[")


def _quoted(path: Path | str) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class SparkEngine:
    """Runs each step's SQL on ``session``; exchanges data with DuckDB through ``scratch``."""

    name = "spark"

    def __init__(self, session: SparkSession, scratch: Path,
                 sources: Mapping[str, str] | None = None, *,
                 use_lake: bool = True) -> None:
        self.session = session
        self.scratch = Path(scratch)
        self.sources = dict(sources or {})
        # the lake beside the ledger file (models/lake.py): the minute samples are read from
        # its partitions, brought up to date first, not exported from DuckDB on every run
        self.use_lake = use_lake
        self._views: set[str] = set()  # Spark views of this run
        self._run: Path | None = None
        for key, value in SESSION_SETTINGS.items():
            session.conf.set(key, value)

    # -- the Engine protocol -------------------------------------------------------------
    def create_temp(self, con: duckdb.DuckDBPyConnection, name: str, sql: str,
                    params: Mapping[str, object]) -> None:
        values = bound(sql, params)
        types = self._duckdb_types(con, sql, values)
        files = self._compute(con, name, sql, values, types)
        drop_temp(con, name)
        con.execute(f"CREATE TEMP VIEW {name} AS {self._read_back(files, types)}")

    def insert(self, con: duckdb.DuckDBPyConnection, table: str, sql: str,
               params: Mapping[str, object]) -> None:
        values = bound(sql, params)
        types = self._duckdb_types(con, sql, values)
        files = self._compute(con, table, sql, values, types)
        con.execute(f"INSERT INTO {table} BY NAME {self._read_back(files, types)}")

    def drop_temps(self, con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> None:
        for name in names:
            drop_temp(con, name)
        for view in self._views:
            self.session.catalog.dropTempView(view)
        self._views.clear()
        if self._run is not None:
            shutil.rmtree(self._run, ignore_errors=True)
            self._run = None

    # -- steps -----------------------------------------------------------------------------
    def _run_dir(self) -> Path:
        if self._run is None:
            self._run = self.scratch / f"run-{uuid.uuid4().hex[:12]}"
            self._run.mkdir(parents=True)
        return self._run

    @staticmethod
    def _duckdb_types(con: duckdb.DuckDBPyConnection, sql: str,
                      values: Mapping[str, object]) -> list[tuple[str, str]]:
        """The columns and types DuckDB gives ``sql`` (bound, not run)."""
        return [(row[0], row[1]) for row in con.execute(f"DESCRIBE {sql}", values).fetchall()]

    def _compute(self, con: duckdb.DuckDBPyConnection, name: str, sql: str,
                 values: Mapping[str, object], types: list[tuple[str, str]]) -> Path:
        for table in sorted(tables_read(sql)):
            self._provide(con, table)
        frame = self.session.sql(to_spark(sql, values))
        found = [f.name for f in frame.schema.fields]
        expected = [c for c, _ in types]
        if sorted(found) != sorted(expected):
            msg = f"expected Spark's {name} to have DuckDB's columns {expected}, found {found}"
            raise ValueError(msg)
        out = self._run_dir() / "out" / f"{name}-{uuid.uuid4().hex[:8]}"
        _naive(frame).write.parquet(str(out))
        self._register(name, self.session.read.parquet(str(out)))
        return out

    def _read_back(self, folder: Path, types: list[tuple[str, str]]) -> str:
        """A DuckDB SELECT of the Parquet Spark wrote, with DuckDB's own column types."""
        columns = ", ".join(f"CAST({_ident(c)} AS {t}) AS {_ident(c)}" for c, t in types)
        if not list(folder.glob("*.parquet")):  # Spark wrote no file for no rows
            nulls = ", ".join(f"CAST(NULL AS {t}) AS {_ident(c)}" for c, t in types)
            return f"SELECT {nulls} WHERE false"
        return f"SELECT {columns} FROM read_parquet({_quoted(folder / '*.parquet')})"

    def _register(self, name: str, frame: DataFrame) -> None:
        frame.createOrReplaceTempView(name)
        self._views.add(name)

    def _provide(self, con: duckdb.DuckDBPyConnection, table: str) -> None:
        """Make ``table`` a Spark view of this run (from sources, or exported from DuckDB)."""
        if table in self._views:
            return
        if table in self.sources:
            self._register(table, self._read_source(table, self.sources[table]))
            return
        lake = self._lake(con) if table in LAKE_INPUTS else None
        if lake is not None and self._lake_current(con, lake, table):
            self._register(table, self._read_source(table, lake_table_glob(lake, table)))
            return
        target = self._run_dir() / "in" / f"{table}.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        con.execute(f"COPY (SELECT * FROM {table}) TO {_quoted(target)} (FORMAT parquet)")
        self._register(table, self.session.read.parquet(str(target)))

    def _lake(self, con: duckdb.DuckDBPyConnection) -> Path | None:
        """The lake of the ledger file ``con`` has open (none for an in-memory ledger)."""
        if not self.use_lake:
            return None
        path = scalar(con, "SELECT path FROM duckdb_databases() "
                           "WHERE database_name = current_database()")
        return lake_root(Path(path)) if path else None

    @staticmethod
    def _lake_current(con: duckdb.DuckDBPyConnection, lake: Path, table: str) -> bool:
        """Write the lake partitions of ``table`` that changed since the last sync; whether the
        lake holds any (an empty table is exported from DuckDB instead: no files to read)."""
        from models.lake_publish import sync_lake

        synced = sync_lake(con, lake, only=(table,))
        return any(p.table_name == table and p.rows for p in synced.catalog.values())

    def _read_source(self, table: str, location: str) -> DataFrame:
        reader, paths = self.session.read, [location]
        if any(ch in location for ch in _GLOB):
            parts = Path(location).parts
            first_glob = next(i for i, p in enumerate(parts) if any(ch in p for ch in _GLOB))
            base = Path(*parts[:first_glob])
            # the files themselves, not the glob: Spark looks for a streaming sink's metadata
            # at a single path it is given and logs a warning with a stack trace when that path
            # is a pattern, at every read
            paths = sorted(str(f) for f in base.glob(str(Path(*parts[first_glob:]))))
            if not paths:
                msg = f"expected Parquet files for {table} at {location}, found none"
                raise FileNotFoundError(msg)
            reader = reader.option("basePath", str(base))
        frame = reader.parquet(*paths)
        ledger = _LEDGER.get(table)
        if ledger is None:
            return frame
        # the ledger's columns and types (partition values are read as strings)
        have = set(frame.columns)
        missing = [c for c in ledger.column_names if c not in have]
        if missing:
            msg = f"expected the columns {missing} of {table} in {location}, found {frame.columns}"
            raise ValueError(msg)
        return frame.select(*[F.col(f"`{c}`").cast(_spark_type(t)).alias(c)
                              for c, t in ledger.columns])


def _spark_type(duckdb_type: str) -> str:
    """A ledger column's DuckDB type as a Spark SQL type."""
    t = duckdb_type.strip().upper()
    if t.endswith("[]"):
        return f"ARRAY<{_spark_type(t[:-2])}>"
    if t.startswith("STRUCT("):
        fields = t[len("STRUCT("):-1].split(",")
        return "STRUCT<" + ", ".join(
            f"{f.split()[0].lower()}: {_spark_type(' '.join(f.split()[1:]))}"
            for f in fields) + ">"
    simple = {"VARCHAR": "STRING", "JSON": "STRING", "TIMESTAMP": "TIMESTAMP_NTZ",
              "BOOLEAN": "BOOLEAN", "DOUBLE": "DOUBLE", "FLOAT": "FLOAT", "BIGINT": "BIGINT",
              "INTEGER": "INT", "SMALLINT": "SMALLINT", "DATE": "DATE"}
    if t in simple:
        return simple[t]
    if t.startswith("DECIMAL"):
        return t
    msg = f"expected a ledger column type with a Spark twin, found {duckdb_type!r}"
    raise ValueError(msg)


def _naive(frame: DataFrame) -> DataFrame:
    """Every TIMESTAMP (with a time zone) as TIMESTAMP_NTZ: the session is UTC, so no shift."""
    if not any(isinstance(f.dataType, T.TimestampType) for f in frame.schema.fields):
        return frame
    return frame.select(*[
        F.col(f"`{f.name}`").cast(T.TimestampNTZType()).alias(f.name)
        if isinstance(f.dataType, T.TimestampType) else F.col(f"`{f.name}`")
        for f in frame.schema.fields])
