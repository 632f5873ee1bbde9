"""The serving snapshot over the lake: small tables copied, lake tables as views.

In the snapshot each lake table is a view over the version files its catalog (the table
``lake_partitions``) names, so one snapshot is one published state, lake included. Confined
readers (``enable_external_access = false``) cannot run ``read_parquet``; allowing the lake
folder through ``allowed_directories`` would also let them ``COPY … TO`` into it (DuckDB 1.5.6
checks the same list for writes), so :func:`register_lake` instead hands DuckDB pyarrow
datasets over the same immutable files as temporary views of the same names: they read those
files and nothing else, and the reader still cannot read or write any other file.

Locations are relative to the ledger, so a site folder moved whole keeps serving: the catalog
names each file relative to the lake root, :func:`register_lake` finds them in the lake beside
the ledger it opens (the root recorded at publish only for a snapshot copied without its lake),
and the views' text joins the relative names to ``getvariable('gpuledger_lake')`` when a
reader sets it (the ``duckdb`` CLI after a move, before the next publish), else to the root at
publish.
"""

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds

from models.lake import (
    LAKE_BY_NAME,
    LAKE_TABLES,
    VERSIONS,
    dataset_schema,
    empty_select,
    lake_root,
    select_columns,
)
from models.lake_publish import Key, Partition, catalog_table
from models.scalars import scalar
from models.schema import LAKE_CHANGES

CATALOG_TABLE = "lake_partitions"
#: A DuckDB variable a reader may set to the lake's folder: the snapshot's views read it there.
LAKE_VARIABLE = "gpuledger_lake"
HIVE_KEYS = pa.schema([("cluster", pa.string()), ("day", pa.date32())])


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def quote_catalog(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def ledger_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The base tables of the ledger (its own catalog, not temp or attached ones)."""
    return [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND NOT temporary ORDER BY table_name").fetchall()]


def small_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The tables that stay whole: every table but the lake's and the change log."""
    return [t for t in ledger_tables(con)
            if t not in LAKE_BY_NAME and t not in (LAKE_CHANGES.name, CATALOG_TABLE)]


def copy_serving(con: duckdb.DuckDBPyConnection, alias: str, catalog: dict[Key, Partition],
                 root: Path) -> None:
    """Fill the attached, empty database ``alias``: the ledger's schema, the small tables'
    rows, each lake table as a view over its current files, and the catalog."""
    source = quote_catalog(scalar(con, "SELECT current_database()"))
    con.execute(f"COPY FROM DATABASE {source} TO {alias} (SCHEMA)")
    for name in small_tables(con):
        con.execute(f'INSERT INTO {alias}.main."{name}" SELECT * FROM {source}.main."{name}"')
    files: dict[str, list[str]] = {}
    for p in catalog.values():
        if p.rows > 0:
            files.setdefault(p.table_name, []).append(p.file)
    at = f"coalesce(getvariable('{LAKE_VARIABLE}'), {_sql_string(str(root.resolve()))})"
    kinds = dict(con.execute(
        "SELECT table_name, table_type FROM information_schema.tables WHERE table_catalog = ? "
        "AND table_schema = 'main'", [alias]).fetchall())
    for lake in LAKE_TABLES:  # a ledger made from a snapshot holds them as views already
        kind = "VIEW" if kinds.get(lake.name) == "VIEW" else "TABLE"
        con.execute(f'DROP {kind} IF EXISTS {alias}.main."{lake.name}"')
        listed = sorted(files.get(lake.name, ()))
        if listed:
            paths = ", ".join(_sql_string(f) for f in listed)
            body = (f"SELECT {select_columns(lake)} FROM read_parquet(list_transform([{paths}], "
                    f"f -> {at} || '/' || f), "
                    "hive_partitioning = true, hive_types = {'cluster': VARCHAR, 'day': DATE}, "
                    "hive_types_autocast = false)")
        else:
            body = empty_select(lake)
        con.execute(f'CREATE VIEW {alias}.main."{lake.name}" AS {body}')
    name = f"_lake_catalog_{id(catalog)}"
    con.register(name, catalog_table(catalog))
    try:
        # location: where the file was at publish (a snapshot copied alone reads the lake it
        # names); readers look for `file` in the lake beside the ledger first
        con.execute(f"DROP TABLE IF EXISTS {alias}.main.{CATALOG_TABLE}")
        con.execute(f"CREATE TABLE {alias}.main.{CATALOG_TABLE} AS SELECT *, "
                    f"{_sql_string(str(root.resolve()))} || '/' || file AS location FROM {name}")
    finally:
        con.unregister(name)


def register_lake(con: duckdb.DuckDBPyConnection, db_path: Path) -> None:
    """Shadow the snapshot's lake views with pyarrow datasets over the same files (for a
    confined reader, which may not open files itself). A snapshot without a lake (published
    before it) is left as it is."""
    found = con.execute(
        "SELECT 1 FROM duckdb_tables() WHERE database_name = current_database() "
        f"AND table_name = '{CATALOG_TABLE}'").fetchone()
    if found is None:
        return
    rows = con.execute(f"SELECT table_name, file, location FROM {CATALOG_TABLE} "
                       "WHERE rows > 0 ORDER BY ALL").fetchall()
    root = lake_root(db_path).resolve()  # the lake beside the ledger, wherever it now is
    if rows and not (root / rows[0][1]).is_file():
        _, file, location = rows[0]
        published = Path(location[:-len(file) - 1])  # a snapshot copied without its lake
        if (published / file).is_file():
            root = published
    files: dict[str, list[str]] = {}
    for table_name, file, _ in rows:
        files.setdefault(table_name, []).append(str(root / file))
    for lake in LAKE_TABLES:
        dataset = ds.dataset(files.get(lake.name, []), schema=dataset_schema(lake),
                             format="parquet",
                             partitioning=ds.partitioning(HIVE_KEYS, flavor="hive"),
                             partition_base_dir=str(root / VERSIONS / lake.name))
        hidden = f"_lake_{lake.name}"
        con.register(hidden, dataset)
        con.execute(f'CREATE TEMP VIEW "{lake.name}" AS SELECT {select_columns(lake)} '
                    f"FROM {hidden}")
