"""The ledger's own bookkeeping: ingest runs, builds and the days they covered or must rebuild,
the files read, rejected input, lake changes to publish and schema migrations."""

from models.schema.core import Table

INGEST_RUNS = Table(
    "ingest_runs",
    (
        ("source", "VARCHAR"),
        ("partition_key", "VARCHAR"),
        ("window_start", "TIMESTAMP"),
        ("window_end", "TIMESTAMP"),
        ("finished_at", "TIMESTAMP"),
        ("rows_loaded", "BIGINT"),
        ("rows_rejected", "BIGINT"),
        ("detail", "VARCHAR"),
    ),
    key=("source", "partition_key"),
    doc="One row per successful load of a source partition; feeds the freshness line.",
)

BUILDS_UNFINISHED = Table(
    "builds_unfinished",
    (
        ("first_day", "DATE"),
        ("last_day", "DATE"),
        ("started_at", "TIMESTAMP"),
        ("pid", "BIGINT"),
        ("host", "VARCHAR"),
    ),
    key=("first_day", "last_day", "started_at"),
    doc="Builds that started and have not finished: while a row is here the derived tables "
    "(allocations, usage, invoices, incidents) may disagree, and publishing is refused. The "
    "next build of those days repairs them and removes the row.",
)

BUILT_DAYS = Table(
    "built_days",
    (
        ("day", "DATE"),
        ("built_at", "TIMESTAMP"),
    ),
    key=("day",),
    doc="The UTC days whose derived tables a build finished, and when. A later build of a "
    "neighbouring day rebuilds them too: their figures read that day's data (readings and "
    "incidents across midnight, pods placed by the next day's samples), so whatever order the "
    "days arrive in gives one ledger (docs/accounting.md \"Order of arrival\").",
)

DAYS_TO_REBUILD = Table(
    "days_to_rebuild",
    (
        ("day", "DATE"),
        ("reason", "VARCHAR"),
        ("marked_at", "TIMESTAMP"),
    ),
    key=("day", "reason"),
    doc="Built days whose inputs a load changed afterwards (a sacct pull that found a run of "
    "the day changed or late, a Kubernetes window re-read): the next build of any days also "
    "rebuilds these, and the days beside them, and clears the marks (docs/accounting.md "
    "\"Order of arrival\").",
)

SOURCE_FILES = Table(
    "source_files",
    (
        ("kind", "VARCHAR"),
        ("path", "VARCHAR"),
        ("sha256", "VARCHAR"),
        ("bytes", "BIGINT"),
        ("lines", "BIGINT"),
        ("loaded_at", "TIMESTAMP"),
    ),
    key=("kind", "path"),
    doc="Every input file loaded, with its hash, so a figure can be traced to its file.",
)

REJECTS = Table(
    "rejects",
    (
        ("source", "VARCHAR"),
        ("source_file", "VARCHAR"),
        ("line_no", "BIGINT"),
        ("field", "VARCHAR"),
        ("reason", "VARCHAR"),
        ("raw", "VARCHAR"),
    ),
    key=("source", "source_file", "line_no"),
    doc="Input lines that could not be loaded: kept and counted, never dropped.",
)

LAKE_CHANGES = Table(
    "lake_changes",
    (
        ("table_name", "VARCHAR"),
        ("cluster", "VARCHAR"),  # NULL: every cluster of the day
        ("day", "DATE"),
    ),
    key=("table_name", "cluster", "day"),
    doc="Partitions of the lake tables (docs/storage.md) written since the last publish, marked "
    "in the same transaction as the write: the next publish rewrites only these Parquet "
    "partitions and then clears the rows. cluster NULL means every cluster of that day.",
)

SCHEMA_MIGRATIONS = Table(
    "schema_migrations",
    (
        ("version", "INTEGER"),
        ("name", "VARCHAR"),
        ("applied_at", "TIMESTAMP"),
        ("changes", "VARCHAR[]"),
    ),
    key=("version",),
    doc="Every migration applied to the ledger (models/migrations.py): its version, name, when "
    "and what it changed; the ledger's schema version is the highest (docs/storage.md, "
    "\"Upgrades\").",
)
