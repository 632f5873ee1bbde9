"""Library functions behind both the CLI and the Dagster assets (one code path).

Each loader takes an open DuckDB connection to the ledger, replaces exactly the slice it owns in
one transaction (so a re-run changes nothing) and returns what it did.
"""

import csv
import io
from collections.abc import Sequence
from pathlib import Path

import duckdb
import polars as pl

from connectors.errors import Reject
from connectors.kubernetes.workload_conditions import DEFAULT_GPU_RESOURCES
from connectors.kubernetes.workload_snapshot import read_workload_snapshot
from connectors.reference_files import read_accounts, read_identity_map, read_nodes, read_rate_card
from gpuledger.ingest.loads import LoadResult, register_file, store_rejects
from gpuledger.ingest.nodenames import load_namer, record_names
from models import schema
from models.cells import safe_cell
from models.runner import read_snapshot, record_ingest, replace_rows, transaction


def _load_table_file(
    con: duckdb.DuckDBPyConnection,
    *,
    source: str,
    path: Path,
    frame: pl.DataFrame,
    rejects: list[Reject],
    table: schema.Table,
) -> LoadResult:
    replace_rows(con, table, frame)
    store_rejects(con, source, path, rejects)
    register_file(con, source, path, frame.height + len(rejects))
    record_ingest(con, source=source, partition_key=str(path), window_start=None,
                  window_end=None, rows_loaded=frame.height, rows_rejected=len(rejects))
    return LoadResult(source, frame.height, tuple(rejects))


def import_identity_map(con: duckdb.DuckDBPyConnection, path: Path) -> LoadResult:
    """Replace the identity map with the rows of ``path``."""
    frame, rejects = read_identity_map(path)
    return _load_table_file(con, source="identity_map", path=path, frame=frame,
                            rejects=rejects, table=schema.IDENTITY_MAP)


def import_accounts(con: duckdb.DuckDBPyConnection, path: Path) -> LoadResult:
    """Replace the Slurm account tree with the rows of ``path``."""
    frame, rejects = read_accounts(path)
    return _load_table_file(con, source="slurm_accounts", path=path, frame=frame,
                            rejects=rejects, table=schema.SLURM_ACCOUNTS)


def import_rate_card(con: duckdb.DuckDBPyConnection, path: Path) -> LoadResult:
    """Replace the rate card with the rows of ``path``."""
    frame, rejects = read_rate_card(path)
    return _load_table_file(con, source="rate_card", path=path, frame=frame,
                            rejects=rejects, table=schema.RATE_CARD)


def import_nodes(con: duckdb.DuckDBPyConnection, path: Path, cluster: str) -> LoadResult:
    """Replace the GPU inventory of ``cluster`` with the rows of ``path``."""
    frame, rejects = read_nodes(path)
    frame = frame.with_columns(pl.lit(cluster).alias("cluster"))
    namer = load_namer(con)
    frame = namer.canonical_frame(frame)
    with transaction(con):
        record_names(con, namer, "nodes")
        replace_rows(con, schema.NODES, frame, where="cluster = ?", params=(cluster,),
                     atomic=False)
    store_rejects(con, "nodes", path, rejects)
    register_file(con, "nodes", path, frame.height + len(rejects))
    record_ingest(con, source="nodes", partition_key=cluster, window_start=None,
                  window_end=None, rows_loaded=frame.height, rows_rejected=len(rejects))
    return LoadResult("nodes", frame.height, tuple(rejects), tuple(namer.warnings))


def import_workloads(
    con: duckdb.DuckDBPyConnection, path: Path, *,
    gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES, cluster: str = "",
) -> LoadResult:
    """Load a Kueue Workload snapshot as one observation of the Workload history
    (``kueue_workload_history``), then ``kueue_workloads_raw`` (the objects) and
    ``kueue_workloads`` (their conditions read, which the detectors use) from it, in one
    transaction (``gpuledger/ingest/kubernetes/workload_history.py``).

    The one path for the CLI (``import-workloads``, ``load-world``, ``ingest kubernetes
    --workloads``) and the Dagster Kueue assets. Workloads are keyed by uid: the latest state
    seen wins, and one a later snapshot no longer lists keeps its last state. A bad item is
    rejected alone (``rejects``: its index as the line, its JSON path as the field) and the
    others load. The observation time is the UTC time in the file name, else its mtime.
    """
    # workload_history uses this module's LoadResult and file bookkeeping
    from gpuledger.ingest.kubernetes.workload_history import store_snapshot

    path = Path(path)
    snap = read_workload_snapshot(path, gpu_resources=gpu_resources)
    result, _ = store_snapshot(con, path, snap, cluster=cluster, gpu_resources=gpu_resources)
    return result


#: what `gpuledger sql` runs: queries (SELECT, WITH, FROM, DESCRIBE, SHOW, SUMMARIZE, PRAGMA
#: show_tables parse as SELECT) and EXPLAIN; a CALL, SET or any other statement is refused
#: before DuckDB runs it (a CALL enable_logging to a file aborted the process, issue #28)
READ_ONLY_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})


def _refusal(found: object) -> ValueError:
    """The one-line refusal: DuckDB's own messages span lines (``LINE 1: …``)."""
    text = " ".join(str(found).split())
    return ValueError(f"expected a read-only query on the published ledger, found: {text}")


def run_sql(db_path: Path, query: str) -> str:
    """Run a read-only query against the published snapshot; CSV with a header."""
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise _refusal(exc) from exc
    for statement in statements:
        if statement.type not in READ_ONLY_STATEMENTS:
            found = f"a {statement.type.name} statement"
            raise _refusal(found)
    with read_snapshot(db_path) as con:
        try:
            rel = con.sql(query)
            if rel is None:
                return ""
            columns = rel.columns
            rows = rel.fetchall()
        except duckdb.Error as exc:
            # the reader is confined (models.runner.read_snapshot): writes, files and settings
            # end here, as does plain bad SQL
            raise _refusal(exc) from exc
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([safe_cell(v) for v in row] for row in rows)  # models.cells
    return out.getvalue()
