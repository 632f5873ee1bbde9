"""The FOCUS export: ``gpuledger export focus --period 2026-W02|2026-01`` and the Dagster asset
after each weekly close write ``<reports>/<period>/focus-1.2.csv`` (and ``.parquet``).

The rows come from ``models/focus.py`` (docs/focus.md); this module reads the optional
``[gpuledger.focus]`` site table (names of the provider, publisher, invoice issuer and billing
account; the currency of unpriced rows; the formats the weekly asset writes) and writes files.
"""

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from models.cells import safe_cell_sql
from models.focus import (
    ALL_COLUMNS,
    FOCUS_VERSIONS,
    ROWS_TABLE,
    FocusIdentity,
    FocusPeriod,
    FocusRows,
    build_focus_rows,
    parse_period,
)

if TYPE_CHECKING:
    from gpuledger.site import ClusterSite, Site
    from gpuledger.site.table import SiteTable

FORMATS = ("csv", "parquet")
TIME_COLUMNS = ("BillingPeriodEnd", "BillingPeriodStart", "ChargePeriodEnd", "ChargePeriodStart",
                "x_AllocationStart", "x_AllocationEnd")
#: FOCUS DateTimeFormat: ISO 8601 in UTC with a Z
UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class FocusSite:
    """``[gpuledger.focus]``: who the FOCUS rows name, and what the weekly asset writes."""

    identity: FocusIdentity = field(default_factory=FocusIdentity)
    formats: tuple[str, ...] = ("csv",)
    version: str = "1.2"


def default_account(clusters: "tuple[ClusterSite, ...]") -> str:
    """The billing account when none is named: the site's clusters ("gpulab", "a+b")."""
    return "+".join(c.name for c in clusters) or "gpuledger"


def parse_focus_table(t: "SiteTable | None", clusters: "tuple[ClusterSite, ...]") -> FocusSite:
    """Read ``[gpuledger.focus]`` (site.py's table reader: "expected ..., found ..." naming the
    file and key); absent, the defaults: "gpuledger" and the clusters' names."""
    account = default_account(clusters)
    if t is None:
        return FocusSite(FocusIdentity(billing_account_id=account, billing_account_name=account))
    names = {}
    for key, default in (("provider", "gpuledger"), ("publisher", "gpuledger"),
                         ("invoice_issuer", "gpuledger"), ("billing_account_id", account),
                         ("billing_account_name", "")):
        value = t.text(key, default)
        if key in t.data and (not value.strip() or not value.isascii()):
            t.fail(key, "a non-empty ASCII string (FOCUS string handling)", value)
        names[key] = value.strip()
    names["billing_account_name"] = names["billing_account_name"] or names["billing_account_id"]
    currency = t.text("currency", "").strip()
    if currency and not (len(currency) == 3 and currency.isascii() and currency.isupper()):
        t.fail("currency", "an ISO 4217 code such as \"EUR\"", currency)
    formats = t.get("formats", list, ["csv"], "a list of formats among [\"csv\", \"parquet\"]")
    if not formats or not all(f in FORMATS for f in formats):  # type: ignore[union-attr]
        t.fail("formats", "a list of formats among [\"csv\", \"parquet\"]", formats)
    version = t.text("version", "1.2")
    if version not in FOCUS_VERSIONS:
        t.fail("version", f"a FOCUS version among {list(FOCUS_VERSIONS)}", version)
    t.done()
    return FocusSite(FocusIdentity(provider=names["provider"], publisher=names["publisher"],
                                   invoice_issuer=names["invoice_issuer"],
                                   billing_account_id=names["billing_account_id"],
                                   billing_account_name=names["billing_account_name"],
                                   currency=currency),
                     tuple(dict.fromkeys(formats)), version)  # type: ignore[arg-type]


def site_focus(site: "Site | None") -> FocusSite:
    """The site's FOCUS settings (defaults without a site file)."""
    if site is None:
        return parse_focus_table(None, ())
    found = getattr(site, "focus", None)
    return found if found is not None else parse_focus_table(None, site.clusters)


def check_version(version: str) -> str:
    if version not in FOCUS_VERSIONS:
        msg = f"expected a FOCUS version among {list(FOCUS_VERSIONS)}, found {version!r}"
        raise ValueError(msg)
    return version


def file_name(version: str, fmt: str) -> str:
    return f"focus-{version}.{fmt}"


def default_path(reports: Path, period: FocusPeriod, version: str, fmt: str) -> Path:
    """``<reports>/<YYYY-Www or YYYY-MM>/focus-1.2.<fmt>``."""
    return reports / period.name / file_name(version, fmt)


def _select(fmt: str, text_columns: frozenset[str] = frozenset()) -> str:
    """The rows with times as FOCUS writes them: ISO 8601 ``...Z`` text in CSV, UTC
    timestamps in Parquet. In CSV, text a spreadsheet would evaluate (a job named ``=HYPERLINK(…)``)
    starts with an apostrophe (models.cells); Parquet keeps the values as they are."""
    parts = []
    for c in ALL_COLUMNS:
        if c in TIME_COLUMNS:
            expr = (f"strftime(\"{c}\", '{UTC_FORMAT}')" if fmt == "csv"
                    else f"timezone('UTC', \"{c}\")")
            parts.append(f'{expr} AS "{c}"')
        elif fmt == "csv" and c in text_columns:
            parts.append(f'{safe_cell_sql(chr(34) + c + chr(34))} AS "{c}"')
        else:
            parts.append(f'"{c}"')
    return f"SELECT {', '.join(parts)} FROM {ROWS_TABLE}"


def write_rows(con: duckdb.DuckDBPyConnection, path: Path, fmt: str) -> Path:
    """Write the temp table ``focus_rows`` of ``con`` to ``path`` (csv or parquet), replacing
    it whole (written beside it, then renamed). The file is written by a connection of its own,
    so ``con`` may be a confined reader of the published ledger."""
    if fmt not in FORMATS:
        msg = f"expected a format among {list(FORMATS)}, found {fmt!r}"
        raise ValueError(msg)
    columns = ", ".join(f'"{c}"' for c in ALL_COLUMNS)
    rows = con.execute(f"SELECT {columns} FROM {ROWS_TABLE}").to_arrow_table()
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    options = "FORMAT csv, HEADER true" if fmt == "csv" else "FORMAT parquet"
    try:
        with duckdb.connect() as writer:
            writer.register(ROWS_TABLE, rows)
            literal = tmp.replace("'", "''")
            text = frozenset(f.name for f in rows.schema
                             if pa.types.is_string(f.type) or pa.types.is_large_string(f.type))
            writer.execute(f"COPY ({_select(fmt, text)}) TO '{literal}' ({options})")
        Path(tmp).replace(path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path


@dataclass(frozen=True)
class FocusExport:
    rows: FocusRows
    files: tuple[Path, ...]

    def summary(self) -> str:
        r = self.rows
        files = ", ".join(str(f) for f in self.files)
        return (f"FOCUS {r.period}: {r.rows} rows ({r.usage_rows} allocation pieces, "
                f"{r.line_grain_rows} invoice lines of weeks closed before allocation charges "
                f"were frozen, {r.correction_rows} corrections, {r.unpriced_rows} unpriced) "
                f"-> {files}")


def export_focus(con: duckdb.DuckDBPyConnection, period: FocusPeriod | str, *,
                 focus: FocusSite, out: dict[str, Path]) -> FocusExport:
    """Build the FOCUS rows of ``period`` and write one file per format (``out``: format ->
    path). Reads the ledger; writes temp tables and the files only."""
    if isinstance(period, str):
        period = parse_period(period)
    rows = build_focus_rows(con, period, focus.identity)
    files = tuple(write_rows(con, path, fmt) for fmt, path in out.items())
    return FocusExport(rows, files)
