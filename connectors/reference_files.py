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
from typing import Any

import polars as pl

from connectors.errors import Reject, SourceError
from connectors.frame_types import PolarsDataType

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
    dtype: PolarsDataType
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
    path = path.resolve()  # one name per file, however it was typed (rejects are keyed by it)
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
                rows.append((*parsed, line_no, raw))
    schema = {c.name: c.dtype for c in columns}
    frame = pl.DataFrame(rows, schema={**schema, "_line": pl.Int64, "_raw": pl.String},
                         orient="row")
    return frame, rejects


def _without_meta(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.drop("_line", "_raw")


def check_validity(frame: pl.DataFrame, key: list[str], *, source: str, path: Path,
                   rejects: list[Reject]) -> pl.DataFrame:
    """Effective-dated rows: reject a range whose ``valid_from`` is not before ``valid_to``, an
    exact duplicate, and a range overlapping an earlier line's for the same `key` (the earlier
    line is kept: which of two overlapping rows applies would otherwise be a guess)."""
    keep: list[int] = []
    kept_ranges: dict[tuple[Any, ...], list[tuple[date | None, date | None, int]]] = {}
    for row in frame.iter_rows(named=True):
        start, end, line, raw = row["valid_from"], row["valid_to"], row["_line"], row["_raw"]
        if start is not None and end is not None and start >= end:
            rejects.append(Reject(source, str(path), line, "valid_to",
                                  f"expected valid_to after valid_from {start}, found {end}",
                                  raw))
            continue
        ident = tuple(row[c] for c in key)
        clash = None
        for other_start, other_end, other_line in kept_ranges.get(ident, []):
            if ((end is None or other_start is None or other_start < end)
                    and (other_end is None or start is None or start < other_end)):
                clash = (other_start, other_end, other_line)
                break
        if clash is not None:
            same = (clash[0], clash[1]) == (start, end)
            described = ", ".join(f"{c}={row[c]!r}" for c in key)
            reason = (f"expected one row per {described} and validity, found a duplicate of "
                      f"line {clash[2]}" if same else
                      f"expected validity not overlapping line {clash[2]} "
                      f"({clash[0] or 'unbounded'} .. {clash[1] or 'unbounded'}) for "
                      f"{described}, found {start or 'unbounded'} .. {end or 'unbounded'}")
            rejects.append(Reject(source, str(path), line, "valid_from", reason, raw))
            continue
        kept_ranges.setdefault(ident, []).append((start, end, line))
        keep.append(line)
    return frame.filter(pl.col("_line").is_in(keep))


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
    frame = check_validity(frame, ["source_kind", "key"], source="identity_map",
                           path=path.resolve(), rejects=rejects)
    rejects.sort(key=lambda r: r.line_no)
    return _without_meta(frame).with_columns(
        pl.col(c).fill_null("") for c in ("person", "team", "cost_centre")
    ), rejects


def read_accounts(path: Path) -> tuple[pl.DataFrame, list[Reject]]:
    """Read the Slurm account tree (``account,parent``)."""
    frame, rejects = read_csv_checked(path, ACCOUNT_COLUMNS, source="slurm_accounts")
    return _without_meta(frame).with_columns(pl.col("parent").fill_null("")), rejects


def read_rate_card(path: Path) -> tuple[pl.DataFrame, list[Reject]]:
    """Read the rate card (effective-dated rate per GPU model, domain and QOS)."""
    frame, rejects = read_csv_checked(path, RATE_COLUMNS, source="rate_card")
    frame = frame.with_columns(pl.col("domain", "qos").fill_null(""))
    frame = check_validity(frame, ["gpu_model", "domain", "qos", "currency"],
                           source="rate_card", path=path.resolve(), rejects=rejects)
    rejects.sort(key=lambda r: r.line_no)
    return _without_meta(frame).with_columns(pl.col("domain", "qos").fill_null("")), rejects


def read_nodes(path: Path) -> tuple[pl.DataFrame, list[Reject]]:
    """Read the GPU inventory (one row per GPU)."""
    frame, rejects = read_csv_checked(path, NODE_COLUMNS, source="nodes")
    return _without_meta(frame).with_columns(pl.col("slurm_partition").fill_null("")), rejects


def _email(value: str) -> str:
    local, at, domain = value.partition("@")
    if not (local and at and "." in domain) or any(c in value for c in " ,;<>\"'"):
        msg = f"expected an e-mail address such as alice@example.org, found {value!r}"
        raise ValueError(msg)
    return value


CONTACT_COLUMNS = [
    Column("kind", _one_of(("person", "team")), pl.String),
    Column("name", _text, pl.String),
    Column("email", _email, pl.String),
]


def read_contacts(path: Path) -> tuple[pl.DataFrame, list[Reject]]:
    """Read the alert contacts (``kind,name,email``: kind person|team; docs/alerts.md). A name
    listed twice under one kind is a reject naming the earlier line."""
    frame, rejects = read_csv_checked(path, CONTACT_COLUMNS, source="contacts")
    seen: dict[tuple[str, str], int] = {}
    keep: list[int] = []
    for row in frame.iter_rows(named=True):
        ident = (row["kind"], row["name"])
        if ident in seen:
            rejects.append(Reject("contacts", str(path.resolve()), row["_line"], "name",
                                  f"expected one address per {row['kind']} {row['name']!r}, "
                                  f"found a second (first on line {seen[ident]})", row["_raw"]))
            continue
        seen[ident] = row["_line"]
        keep.append(row["_line"])
    rejects.sort(key=lambda r: r.line_no)
    return _without_meta(frame.filter(pl.col("_line").is_in(keep))), rejects
