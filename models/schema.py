"""Table definitions: the single source of table and column names.

Times are UTC ``TIMESTAMP`` (naive, meaning UTC). Periods are half-open ``[start, end)``.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    """A table of the ledger: its name, columns (name -> DuckDB type) and key."""

    name: str
    columns: tuple[tuple[str, str], ...]
    key: tuple[str, ...] = ()
    doc: str = ""

    @property
    def column_names(self) -> list[str]:
        return [c for c, _ in self.columns]

    def ddl(self) -> str:
        cols = ",\n  ".join(f"{c} {t}" for c, t in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n  {cols}\n)"


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

NODES = Table(
    "nodes",
    (
        ("cluster", "VARCHAR"),
        ("node", "VARCHAR"),
        ("pool", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("gpu_count", "INTEGER"),
        ("gpu_index", "INTEGER"),
        ("gpu_uuid", "VARCHAR"),
        ("slurm_partition", "VARCHAR"),
    ),
    key=("cluster", "node", "gpu_index"),
    doc="GPU inventory: one row per GPU.",
)

IDENTITY_MAP = Table(
    "identity_map",
    (
        ("source_kind", "VARCHAR"),
        ("key", "VARCHAR"),
        ("person", "VARCHAR"),
        ("team", "VARCHAR"),
        ("cost_centre", "VARCHAR"),
        ("valid_from", "DATE"),
        ("valid_to", "DATE"),
    ),
    key=("source_kind", "key", "valid_from"),
    doc="Raw identity keys to person, team, cost centre (see docs/contracts.md).",
)

SLURM_ACCOUNTS = Table(
    "slurm_accounts",
    (("account", "VARCHAR"), ("parent", "VARCHAR")),
    key=("account",),
    doc="The Slurm account tree.",
)

RATE_CARD = Table(
    "rate_card",
    (
        ("gpu_model", "VARCHAR"),
        ("domain", "VARCHAR"),
        ("qos", "VARCHAR"),
        ("valid_from", "DATE"),
        ("valid_to", "DATE"),
        ("rate_per_gpu_hour", "DECIMAL(18,6)"),
        ("currency", "VARCHAR"),
    ),
    key=("gpu_model", "domain", "qos", "valid_from"),
    doc="Effective-dated GPU-hour rates; empty domain or qos means any.",
)

KUEUE_WORKLOADS_RAW = Table(
    "kueue_workloads_raw",
    (
        ("uid", "VARCHAR"),
        ("namespace", "VARCHAR"),
        ("name", "VARCHAR"),
        ("queue_name", "VARCHAR"),
        ("cluster_queue", "VARCHAR"),
        ("created_at", "TIMESTAMP"),
        ("pod_sets", "INTEGER"),
        ("pods_wanted", "INTEGER"),
        ("object_json", "JSON"),
        ("source_file", "VARCHAR"),
    ),
    key=("uid",),
    doc="Kueue Workload objects as loaded from a snapshot, one row per workload.",
)

SACCT_LINES_RAW = Table(
    "sacct_lines_raw",
    (
        ("source_file", "VARCHAR"),
        ("line_no", "BIGINT"),
        ("job_id", "VARCHAR"),
        ("line", "VARCHAR"),
    ),
    key=("source_file", "line_no"),
    doc="The sacct dump lines as read, kept so every parsed run can be traced to its line.",
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

ALL_TABLES: tuple[Table, ...] = (
    REJECTS,
    INGEST_RUNS,
    SOURCE_FILES,
    NODES,
    IDENTITY_MAP,
    SLURM_ACCOUNTS,
    RATE_CARD,
    KUEUE_WORKLOADS_RAW,
    SACCT_LINES_RAW,
)


def table(name: str) -> Table:
    """Look a table up by name."""
    for t in ALL_TABLES:
        if t.name == name:
            return t
    msg = f"expected one of the tables {[t.name for t in ALL_TABLES]}, found {name!r}"
    raise KeyError(msg)
