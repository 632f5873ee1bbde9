"""Errors and reject records shared by the source adapters."""

from dataclasses import dataclass

import polars as pl

from connectors.frame_types import SchemaDict


class SourceError(RuntimeError):
    """A source could not be read at all (missing file, failing command, unreachable server)."""


@dataclass(frozen=True)
class Reject:
    """One input line that could not be loaded, with where and why."""

    source: str
    source_file: str
    line_no: int
    field: str
    reason: str
    raw: str

    def describe(self) -> str:
        return f"{self.source_file}:{self.line_no}: field {self.field}: {self.reason}"


REJECT_SCHEMA: SchemaDict = {
    "source": pl.String,
    "source_file": pl.String,
    "line_no": pl.Int64,
    "field": pl.String,
    "reason": pl.String,
    "raw": pl.String,
}


def rejects_frame(rejects: list[Reject]) -> pl.DataFrame:
    """Rejects as a frame with the ``rejects`` table's columns."""
    return pl.DataFrame(
        [
            (r.source, r.source_file, r.line_no, r.field, r.reason, r.raw)
            for r in rejects
        ],
        schema=REJECT_SCHEMA,
        orient="row",
    )
