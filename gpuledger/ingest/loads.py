"""What every load records besides its rows: its result, its rejected lines and the file it read.

The loaders of ``gpuledger/ingest/service.py``, ``workload_history.py`` and ``pod_groups.py`` share
these
(one rule for rejects and source files).
"""

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl

from connectors.errors import Reject, rejects_frame
from connectors.textfiles import file_digest
from models import schema
from models.runner import replace_rows


@dataclass(frozen=True)
class LoadResult:
    """What one load did: rows kept and lines rejected (with their reasons)."""

    source: str
    rows: int
    rejects: tuple[Reject, ...] = field(default_factory=tuple)
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def summary(self) -> str:
        text = f"{self.source}: {self.rows} rows loaded, {len(self.rejects)} rejected"
        for w in self.warnings:
            text += f"\n  warning: {w}"
        for r in self.rejects[:5]:
            text += f"\n  rejected {r.describe()}"
        if len(self.rejects) > 5:
            text += f"\n  … and {len(self.rejects) - 5} more (see the rejects table)"
        return text


def store_rejects(
    con: duckdb.DuckDBPyConnection, source: str, path: Path, rejects: list[Reject],
    *, atomic: bool = True,
) -> None:
    """Replace the rejects kept for this source and file with `rejects`."""
    name = str(path.resolve())  # one name per file, however its path was typed
    replace_rows(
        con,
        schema.REJECTS,
        rejects_frame(rejects).with_columns(pl.lit(name).alias("source_file")),
        where="source = ? AND source_file = ?",
        params=(source, name),
        atomic=atomic,
    )


def register_file(con: duckdb.DuckDBPyConnection, kind: str, path: Path, lines: int,
                   *, atomic: bool = True) -> None:
    """Record the file a load read (its sha256, size and lines) in ``source_files``."""
    path = path.resolve()  # one row per file, however its path was typed
    sha, size = file_digest(path)
    frame = pl.DataFrame(
        {
            "kind": [kind],
            "path": [str(path)],
            "sha256": [sha],
            "bytes": [size],
            "lines": [lines],
            "loaded_at": [datetime.now(UTC).replace(tzinfo=None)],
        },
        schema={
            "kind": pl.String, "path": pl.String, "sha256": pl.String,
            "bytes": pl.Int64, "lines": pl.Int64, "loaded_at": pl.Datetime("us"),
        },
    )
    replace_rows(con, schema.SOURCE_FILES, frame, where="kind = ? AND path = ?",
                 params=(kind, str(path)), atomic=atomic)
