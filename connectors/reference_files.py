"""Readers for the small reference files: identity map, account tree, rate card, GPU inventory.

Each reader validates every line and returns ``(frame, rejects)``: good rows load, bad rows are
reported with file, line and field, and nothing is silently dropped.
"""

import csv
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path

import polars as pl

from connectors.errors import Reject, SourceError

IDENTITY_SOURCE_KINDS = (
    "slurm_user",
    "slurm_account",
    "k8s_namespace",
    "k8s_service_account",
    "kueue_queue",
    "pod_label",
)


@dataclass(frozen=True)
class Column:
    """A CSV column: its name, the parser of its text and whether it may be empty."""

    name: str
    parse: Callable[[str], object]
    dtype: pl.DataType
    required: bool = True


def _text(value: str) -> str:
    return value


def _date_or_none(value: str) -> date | None:
    return date.fromisoformat(value) if value else None


def _int(value: str) -> int:
    return int(value)


def _decimal(value: str) -> Decimal:
    try:
        return Decimal(value)
    except InvalidOperation as exc:
        msg = f"expected a decimal number, found {value!r}"
        raise ValueError(msg) from exc


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in choices:
            msg = f"expected one of {', '.join(choices)}, found {value!r}"
            raise ValueError(msg)
        return value

    return parse


def read_csv_checked(
    path: Path, columns: list[Column], *, source: str
) -> tuple[pl.DataFrame, list[Reject]]:
    """Read a CSV with a header; every line is validated against ``columns``."""
    if not path.is_file():
        msg = f"expected a {source} file at {path}, found none"
        raise SourceError(msg)
    rows: list[tuple[object, ...]] = []
    rejects: list[Reject] = []
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        wanted = [c.name for c in columns]
        if header is None or any(name not in header for name in wanted):
            msg = f"{path}:1: expected a header with columns {wanted}, found {header}"
            raise SourceError(msg)
        where = {name: header.index(name) for name in wanted}
        for values in reader:
            line_no = reader.line_num
            raw = ",".join(values)
            if not values or all(not v.strip() for v in values):
                continue
            if len(values) != len(header):
                rejects.append(
                    Reject(source, str(path), line_no, "*",
                           f"expected {len(header)} fields, found {len(values)}", raw)
                )
                continue
            parsed: list[object] = []
            for col in columns:
                text = values[where[col.name]].strip()
                try:
                    if not text and col.required:
                        msg = "expected a value, found an empty field"
                        raise ValueError(msg)
                    parsed.append(col.parse(text) if text or col.parse is _text else None)
                except ValueError as exc:
                    rejects.append(Reject(source, str(path), line_no, col.name, str(exc), raw))
                    break
            else:
                rows.append(tuple(parsed))
    schema = {c.name: c.dtype for c in columns}
    return pl.DataFrame(rows, schema=schema, orient="row"), rejects


IDENTITY_COLUMNS = [
    Column("source_kind", _one_of(IDENTITY_SOURCE_KINDS), pl.String),
    Column("key", _text, pl.String),
    Column("person", _text, pl.String, required=False),
    Column("team", _text, pl.String, required=False),
    Column("cost_centre", _text, pl.String, required=False),
    Column("valid_from", _date_or_none, pl.Date, required=False),
    Column("valid_to", _date_or_none, pl.Date, required=False),
]

ACCOUNT_COLUMNS = [
    Column("account", _text, pl.String),
    Column("parent", _text, pl.String, required=False),
]

RATE_COLUMNS = [
    Column("gpu_model", _text, pl.String),
    Column("domain", _one_of(("", "slurm", "kubernetes")), pl.String, required=False),
    Column("qos", _text, pl.String, required=False),
    Column("valid_from", _date_or_none, pl.Date, required=False),
    Column("valid_to", _date_or_none, pl.Date, required=False),
    Column("rate_per_gpu_hour", _decimal, pl.Decimal(18, 6)),
    Column("currency", _text, pl.String),
]

NODE_COLUMNS = [
    Column("node", _text, pl.String),
    Column("pool", _one_of(("slurm", "kubernetes", "shared")), pl.String),
    Column("gpu_model", _text, pl.String),
    Column("gpu_count", _int, pl.Int32),
    Column("gpu_index", _int, pl.Int32),
    Column("gpu_uuid", _text, pl.String),
    Column("slurm_partition", _text, pl.String, required=False),
]


def read_identity_map(path: Path) -> tuple[pl.DataFrame, list[Reject]]:
    """Read an identity map CSV (columns as in docs/contracts.md)."""
    frame, rejects = read_csv_checked(path, IDENTITY_COLUMNS, source="identity_map")
    return frame.with_columns(
        pl.col(c).fill_null("") for c in ("person", "team", "cost_centre")
    ), rejects


def read_accounts(path: Path) -> tuple[pl.DataFrame, list[Reject]]:
    """Read the Slurm account tree (``account,parent``)."""
    frame, rejects = read_csv_checked(path, ACCOUNT_COLUMNS, source="slurm_accounts")
    return frame.with_columns(pl.col("parent").fill_null("")), rejects


def read_rate_card(path: Path) -> tuple[pl.DataFrame, list[Reject]]:
    """Read the rate card (effective-dated rate per GPU model, domain and QOS)."""
    frame, rejects = read_csv_checked(path, RATE_COLUMNS, source="rate_card")
    return frame.with_columns(pl.col("domain", "qos").fill_null("")), rejects


def read_nodes(path: Path) -> tuple[pl.DataFrame, list[Reject]]:
    """Read the GPU inventory (one row per GPU)."""
    frame, rejects = read_csv_checked(path, NODE_COLUMNS, source="nodes")
    return frame.with_columns(pl.col("slurm_partition").fill_null("")), rejects
