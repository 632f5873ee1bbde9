"""Slurm GPU indices from ``scontrol show job -d`` snapshots into ``slurm_gpu_indices``.

Rows are upserted by (JobIDRaw, node, GPU index, snapshot time), and a file's rejects replace
that file's earlier ones, so importing a snapshot again changes nothing. The detectors map the
indices to GPU UUIDs through the ``nodes`` inventory (docs/detectors.md).
"""

import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl

from connectors.errors import Reject, SourceError, rejects_frame
from connectors.slurm.commands import CommandRunner
from connectors.slurm.scontrol import (
    SOURCE,
    ScontrolParse,
    fetch_scontrol_jobs,
    parse_scontrol_jobs,
)
from connectors.textfiles import file_digest, open_text, regular_files
from gpuledger.ingest.nodenames import load_namer, record_names
from models import schema
from models.runner import record_ingest, replace_rows, transaction, upsert_rows


@dataclass(frozen=True)
class ScontrolLoad:
    """What one snapshot load did."""

    source_file: str
    jobs: int
    gpu_rows: int
    observed_at: datetime | None
    rejects: tuple[Reject, ...] = field(default_factory=tuple)

    def summary(self) -> str:
        seen = f"{self.observed_at:%Y-%m-%d %H:%M:%S} UTC" if self.observed_at else "no time"
        text = (f"scontrol {self.source_file} (snapshot {seen}): {self.jobs} jobs, "
                f"{self.gpu_rows} GPU index rows, {len(self.rejects)} rejected")
        for r in self.rejects[:5]:
            text += f"\n  rejected {r.describe()}"
        if len(self.rejects) > 5:
            text += f"\n  … and {len(self.rejects) - 5} more (see the rejects table)"
        return text


def store_scontrol(con: duckdb.DuckDBPyConnection, parsed: ScontrolParse, *,
                   source_file: str) -> ScontrolLoad:
    """Upsert one parsed snapshot and replace its file's rejects, atomically."""
    namer = load_namer(con)  # canonical node names, as every other table has them
    parsed = replace(parsed, gpus=namer.canonical_frame(parsed.gpus))
    with transaction(con):
        record_names(con, namer, SOURCE)
        # the file's earlier rows go (a re-parse may name fewer GPUs); the key keeps a snapshot
        # saved under two names from being loaded twice
        con.execute("DELETE FROM slurm_gpu_indices WHERE source_file = ?", [source_file])
        upsert_rows(con, schema.SLURM_GPU_INDICES, parsed.gpus,
                    key=schema.SLURM_GPU_INDICES.key, atomic=False)
        replace_rows(con, schema.REJECTS, rejects_frame(parsed.rejects),
                     where="source = ? AND source_file = ?", params=(SOURCE, source_file),
                     atomic=False)
        record_ingest(con, source=SOURCE, partition_key=source_file,
                      window_start=parsed.observed_at, window_end=parsed.observed_at,
                      rows_loaded=parsed.gpus.height, rows_rejected=len(parsed.rejects),
                      atomic=False)
    return ScontrolLoad(source_file, parsed.jobs, parsed.gpus.height, parsed.observed_at,
                        tuple(parsed.rejects))


def import_scontrol_file(con: duckdb.DuckDBPyConnection, path: Path, *, timezone: str = "UTC",
                         observed_at: datetime | None = None) -> ScontrolLoad:
    """Load a saved ``scontrol show job -d`` snapshot (plain or ``.gz``).

    ``timezone``: the zone scontrol printed naive times in (not needed for epoch times).
    ``observed_at``: when it was taken; by default read from the snapshot (see
    :func:`connectors.slurm.scontrol.parse_scontrol_jobs`).
    """
    if not path.is_file():
        msg = f"expected an scontrol snapshot at {path}, found none"
        raise SourceError(msg)
    with open_text(path) as fh:
        text = fh.read()
    parsed = parse_scontrol_jobs(text, source_file=str(path), timezone=timezone,
                                 observed_at=observed_at)
    load = store_scontrol(con, parsed, source_file=str(path))
    register_file(con, path, parsed.lines_read)
    return load


def ingest_scontrol(con: duckdb.DuckDBPyConnection, runner: CommandRunner, *,
                    now: datetime | None = None) -> ScontrolLoad:
    """Take a snapshot now (``scontrol`` here or through the runner's prefix) and store it.

    If scontrol fails, nothing is written.
    """
    parsed = fetch_scontrol_jobs(runner, now=now)
    label = f"scontrol {parsed.observed_at:%Y-%m-%dT%H:%M:%S}" if parsed.observed_at else "scontrol"
    return store_scontrol(con, parsed, source_file=label)


def register_file(con: duckdb.DuckDBPyConnection, path: Path, lines: int) -> None:
    """Remember the file and its hash, so a row can be traced to the exact snapshot."""
    sha, size = file_digest(path)
    frame = pl.DataFrame(
        {"kind": [SOURCE], "path": [str(path)], "sha256": [sha], "bytes": [size],
         "lines": [lines], "loaded_at": [datetime.now(UTC).replace(tzinfo=None)]},
        schema={"kind": pl.String, "path": pl.String, "sha256": pl.String, "bytes": pl.Int64,
                "lines": pl.Int64, "loaded_at": pl.Datetime("us")},
    )
    replace_rows(con, schema.SOURCE_FILES, frame, where="kind = ? AND path = ?",
                 params=(SOURCE, str(path)))


NAME_TIME = re.compile(r"scontrol-(\d{8}T\d{6})Z")


def snapshot_time(path: Path) -> datetime | None:
    """The UTC time in a snapshot's name (``scontrol-20260105T020000Z.txt``), if any."""
    found = NAME_TIME.search(path.name)
    return datetime.strptime(found.group(1), "%Y%m%dT%H%M%S") if found else None


def snapshot_folder_files(folder: Path | None) -> list[Path]:
    """The ``scontrol-*.txt[.gz]`` snapshots of a folder, oldest first (by the time in the
    name): the one listing the CLI's load and Dagster's import both use."""
    if folder is None or not folder.is_dir():
        return []
    files = regular_files(folder, lambda n: n.startswith("scontrol-")
                          and n.endswith((".txt", ".txt.gz")))
    return sorted(files, key=lambda p: (snapshot_time(p) or datetime.min, p.name))
