"""FOCUS 1.2 rows of a billing period (an ISO week or a calendar month): one row per charged
allocation piece per UTC day, Correction rows for the adjustments the period carries.

Open days come from the ledger (``focus_charges.sql`` over the one pricing rule,
``allocation_prices.sql``); the days of a closed week come from what its close froze
(``frozen_allocation_charges``, written by :func:`freeze_charges` inside ``close_week``'s
transaction), so a closed week's file reproduces what was issued whatever late data did to the
ledger. A week closed before that table existed is exported at invoice-line grain from its
frozen lines, with a warning. Rules and columns: docs/focus.md.
"""

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

import duckdb

from models import load_sql
from models.pricing import create_rate_choice
from models.scalars import one_row, scalar
from models.schema import CLOSED_PERIODS, FROZEN_ALLOCATION_CHARGES

#: the FOCUS columns first, then ours (x_), as FOCUS's column handling asks
FOCUS_COLUMNS = (
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency",
    "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory", "ChargeClass",
    "ChargeDescription", "ChargeFrequency", "CommitmentDiscountStatus", "ChargePeriodEnd",
    "ChargePeriodStart", "ConsumedQuantity", "ConsumedUnit", "ContractedCost",
    "ContractedUnitPrice", "EffectiveCost", "InvoiceId", "InvoiceIssuerName", "ListCost",
    "ListUnitPrice", "PricingCategory", "PricingCurrency", "PricingCurrencyContractedUnitPrice",
    "PricingCurrencyEffectiveCost", "PricingCurrencyListUnitPrice", "PricingQuantity",
    "PricingUnit", "ProviderName", "PublisherName", "ResourceId", "ResourceName", "ResourceType",
    "ServiceCategory", "ServiceName", "ServiceSubcategory", "SkuId", "SkuMeter",
    "SkuPriceDetails", "SkuPriceId", "SubAccountId", "SubAccountName", "SubAccountType", "Tags",
)
CUSTOM_COLUMNS = (
    "x_Domain", "x_Cluster", "x_Node", "x_Job", "x_Pod", "x_Workload", "x_Name", "x_Namespace",
    "x_Queue", "x_SlurmUser", "x_SlurmAccount", "x_Qos", "x_Person", "x_Team", "x_GpuModel",
    "x_Gpus", "x_Sharing", "x_SliceProfile", "x_SliceHours", "x_ChargedGpuSeconds",
    "x_MeasuredGpuHours", "x_BusyGpuHours", "x_IdleGpuHours", "x_AllocationStart",
    "x_AllocationEnd", "x_Unpriced", "x_InvoiceLineKey", "x_InvoiceWeek", "x_CorrectedPeriod",
    "x_Source",
)
ALL_COLUMNS = FOCUS_COLUMNS + CUSTOM_COLUMNS
#: the temp table holding the rows of the last :func:`build_focus_rows`
ROWS_TABLE = "focus_rows"
FOCUS_VERSIONS = ("1.2",)


@dataclass(frozen=True)
class FocusPeriod:
    """A billing period: an ISO week (``2026-W02``) or a calendar month (``2026-01``), UTC."""

    name: str
    kind: str  # 'week' | 'month'
    start: date
    end: date  # exclusive

    def __str__(self) -> str:
        return self.name


def parse_period(text: str) -> FocusPeriod:
    """``YYYY-Www`` or ``YYYY-MM``; anything else is a ValueError "expected ..., found ..."."""
    value = text.strip()
    expected = (f"expected a billing period: an ISO week such as 2026-W02 or a month such as "
                f"2026-01, found {text!r}")
    if "-W" in value:
        year, _, week = value.partition("-W")
        if not (year.isdigit() and len(year) == 4 and week.isdigit() and len(week) == 2):
            raise ValueError(expected)
        try:
            monday = date.fromisocalendar(int(year), int(week), 1)
        except ValueError:
            msg = f"expected an ISO week that exists (01 .. 52 or 53), found {text!r}"
            raise ValueError(msg) from None
        return FocusPeriod(value, "week", monday, monday + timedelta(days=7))
    year, _, month = value.partition("-")
    if not (year.isdigit() and len(year) == 4 and month.isdigit() and len(month) == 2
            and 1 <= int(month) <= 12):
        raise ValueError(expected)
    first = date(int(year), int(month), 1)
    following = (first + timedelta(days=32)).replace(day=1)
    return FocusPeriod(value, "month", first, following)


@dataclass(frozen=True)
class FocusIdentity:
    """Who provides, publishes and invoices, and the billing account (``[gpuledger.focus]``)."""

    provider: str = "gpuledger"
    publisher: str = "gpuledger"
    invoice_issuer: str = "gpuledger"
    billing_account_id: str = "gpuledger"
    billing_account_name: str = "gpuledger"
    currency: str = ""  # BillingCurrency of unpriced pieces ('' : the period's priced currency)


@dataclass(frozen=True)
class FocusRows:
    """What :func:`build_focus_rows` put in the temp table ``focus_rows``."""

    period: FocusPeriod
    rows: int
    usage_rows: int
    correction_rows: int
    line_grain_rows: int
    unpriced_rows: int
    warnings: list[str] = field(default_factory=list)


def _week_name(monday: date) -> str:
    year, week, _ = monday.isocalendar()
    return f"{year:04d}-W{week:02d}"


def _weeks(period: FocusPeriod) -> list[date]:
    """The Mondays of the ISO weeks holding a day of ``period``."""
    monday = period.start - timedelta(days=period.start.weekday())
    weeks = []
    while monday < period.end:
        weeks.append(monday)
        monday += timedelta(days=7)
    return weeks


def create_charges(con: duckdb.DuckDBPyConnection, first: date, end: date,
                   table: str = "focus_ledger_charges") -> None:
    """Temp table ``table``: the ledger's charged pieces on the days [first, end)
    (``focus_charges.sql``), priced by the invoice lines' own rule."""
    create_rate_choice(
        con, "SELECT day, domain, gpu_model, qos FROM allocations "
        "WHERE day >= $first AND day < $end UNION ALL SELECT day, domain, slice_profile, qos "
        "FROM allocations WHERE day >= $first AND day < $end AND slice_profile IS NOT NULL",
        {"first": first, "end": end})
    con.execute(f"CREATE OR REPLACE TEMP TABLE allocation_prices AS "
                f"{load_sql('allocation_prices')}", {"first_day": first, "end_day": end})
    con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS {load_sql('focus_charges')}",
                {"first_day": first, "end_day": end})
    for temp in ("allocation_prices", "rate_choice", "rate_keys"):
        con.execute(f"DROP TABLE IF EXISTS {temp}")


def freeze_charges(con: duckdb.DuckDBPyConnection, period: str, revision: int,
                   monday: date, end: date) -> int:
    """Copy the week's charged pieces, as the ledger has them now, to
    ``frozen_allocation_charges`` (``period``, ``revision``). Joins the caller's transaction
    (``close_week``'s); returns the pieces frozen."""
    create_charges(con, monday, end, "focus_freeze_charges")
    columns = ", ".join(c for c in FROZEN_ALLOCATION_CHARGES.column_names
                        if c not in ("closed_period", "revision"))
    con.execute(
        f"INSERT INTO {FROZEN_ALLOCATION_CHARGES.name} (closed_period, revision, {columns}) "
        f"SELECT ?, ?, {columns} FROM focus_freeze_charges", [period, revision])
    count = scalar(con, "SELECT count(*) FROM focus_freeze_charges")
    con.execute("DROP TABLE IF EXISTS focus_freeze_charges")
    return int(count)


def _frozen_table(con: duckdb.DuckDBPyConnection) -> str:
    """The frozen charges, or an empty stand-in on a ledger from before that table (read-only
    readers cannot create it)."""
    exists = scalar(con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = ? "
                         "AND NOT temporary", [FROZEN_ALLOCATION_CHARGES.name])
    if exists:
        return FROZEN_ALLOCATION_CHARGES.name
    con.execute(FROZEN_ALLOCATION_CHARGES.ddl().replace(
        f"CREATE TABLE IF NOT EXISTS {FROZEN_ALLOCATION_CHARGES.name}",
        "CREATE OR REPLACE TEMP TABLE focus_no_frozen_charges"))
    return "focus_no_frozen_charges"


def _closes(con: duckdb.DuckDBPyConnection, weeks: list[date],
            frozen_table: str) -> dict[date, tuple[int, bool]]:
    """Monday -> (latest revision, whether its pieces were frozen) of the closed ones."""
    out: dict[date, tuple[int, bool]] = {}
    for monday in weeks:
        row = one_row(
            con, f"SELECT max(revision) FROM {CLOSED_PERIODS.name} WHERE period = ?",
            [_week_name(monday)])
        if row[0] is None:
            continue
        frozen = scalar(con,
            f"SELECT count(*) > 0 FROM {frozen_table} "
            "WHERE closed_period = ? AND revision = ?", [_week_name(monday), row[0]])
        out[monday] = (int(row[0]), bool(frozen))
    return out


# ISO 4217's code for "no currency", the BillingCurrency of a period with no priced row at all
# (FOCUS requires a currency; the validator's currency list holds it)
NO_CURRENCY = "XXX"


def _fallback_currency(con: duckdb.DuckDBPyConnection, identity: FocusIdentity) -> str:
    if identity.currency:
        return identity.currency
    found = [r[0] for r in con.execute(
        "SELECT DISTINCT currency FROM focus_input WHERE currency <> '' "
        "UNION SELECT DISTINCT currency FROM invoice_adjustments WHERE currency <> '' "
        "ORDER BY 1").fetchall()]
    if not found:  # nothing priced at all: every cost is 0, in ISO 4217's "no currency"
        return NO_CURRENCY
    return found[0] if len(found) == 1 else ""


def build_focus_rows(con: duckdb.DuckDBPyConnection, period: FocusPeriod,
                     identity: FocusIdentity = FocusIdentity()) -> FocusRows:
    """Fill the temp table ``focus_rows`` (columns :data:`ALL_COLUMNS`) with the FOCUS rows
    of ``period``. Reads the ledger; writes only temp tables."""
    warnings: list[str] = []
    first, end = period.start, period.end
    frozen_table = _frozen_table(con)
    closes = _closes(con, _weeks(period), frozen_table)
    create_charges(con, first, end)
    frozen = [(_week_name(m), rev) for m, (rev, has) in closes.items() if has]
    legacy = [(_week_name(m), rev) for m, (rev, has) in closes.items() if not has]
    closed_days = " OR ".join(
        f"(day >= DATE '{m}' AND day < DATE '{m + timedelta(days=7)}')" for m in closes) or "false"
    con.execute("CREATE OR REPLACE TEMP TABLE focus_frozen_weeks (closed_period VARCHAR, "
                "revision INTEGER)")
    for week, revision in frozen:
        con.execute("INSERT INTO focus_frozen_weeks VALUES (?, ?)", [week, revision])
    con.execute(
        "CREATE OR REPLACE TEMP TABLE focus_input AS "
        "SELECT *, strftime(day, '%G-W%V') AS invoice_week, CAST(NULL AS INTEGER) "
        "AS invoice_revision, 'ledger' AS source FROM focus_ledger_charges "
        f"WHERE NOT ({closed_days}) "
        "UNION ALL BY NAME "
        "SELECT f.* EXCLUDE (closed_period, revision), f.closed_period AS invoice_week, "
        "f.revision AS invoice_revision, 'frozen' AS source "
        f"FROM {frozen_table} AS f INNER JOIN focus_frozen_weeks AS w "
        "ON w.closed_period = f.closed_period AND w.revision = f.revision "
        "WHERE f.day >= ? AND f.day < ?", [first, end])
    con.execute("DROP TABLE IF EXISTS focus_ledger_charges")
    kind = "week" if period.kind == "week" else "day"
    con.execute("CREATE OR REPLACE TEMP TABLE focus_line_weeks (closed_period VARCHAR, "
                "revision INTEGER, period_kind VARCHAR)")
    for week, revision in legacy:
        con.execute("INSERT INTO focus_line_weeks VALUES (?, ?, ?)", [week, revision, kind])
        warnings.append(
            f"week {week} was closed (revision {revision}) before allocation-level charges were "
            f"frozen: its rows are its frozen {kind} invoice lines (ResourceId null), not its "
            "jobs and pods")
    fallback = _fallback_currency(con, identity)
    params = {
        "billing_period": period.name,
        "billing_start": datetime.combine(first, datetime.min.time()),
        "billing_end": datetime.combine(end, datetime.min.time()),
        "provider": identity.provider, "publisher": identity.publisher,
        "issuer": identity.invoice_issuer, "account_id": identity.billing_account_id,
        "account_name": identity.billing_account_name, "fallback_currency": fallback or None,
    }
    selects = [f"SELECT * FROM ({load_sql(name)})" for name in
               ("focus_usage_rows", "focus_line_grain_rows")]
    typed = ", ".join(f'"{c}"' for c in ALL_COLUMNS)
    # UNION BY NAME: the usage rows have every column, the others leave theirs NULL
    union = " UNION ALL BY NAME ".join(selects)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {ROWS_TABLE} AS SELECT {typed} FROM ({union}) "
                "ORDER BY ChargePeriodStart, x_InvoiceLineKey, ResourceId, x_Node, "
                "x_AllocationStart, x_CorrectedPeriod", params)
    counts = one_row(
        con, f"SELECT count(*), count(*) FILTER (WHERE x_Source IN ('ledger', 'frozen')), "
        "count(*) FILTER (WHERE ChargeClass = 'Correction'), "
        "count(*) FILTER (WHERE x_Source = 'frozen_line'), "
        f"count(*) FILTER (WHERE x_Unpriced) FROM {ROWS_TABLE}")
    if counts[4]:
        warnings.append(
            f"{counts[4]} rows of {period} have no rate on the rate card: BilledCost 0 "
            "(x_Unpriced = true); price them and rebuild")
        if fallback == NO_CURRENCY:
            warnings.append(f"{period}: no row is priced and [gpuledger.focus] currency is not "
                            f"set: BillingCurrency {NO_CURRENCY} (ISO 4217: no currency)")
    missing = scalar(con, f"SELECT count(*) FROM {ROWS_TABLE} WHERE BillingCurrency IS NULL")
    if missing:
        msg = (f"expected one currency for the {missing} unpriced rows of {period}, found "
               "none or several among the priced rows: set [gpuledger.focus] currency = "
               "\"EUR\" (or the site's) in the site file")
        raise ValueError(msg)
    for temp in ("focus_input", "focus_line_weeks", "focus_frozen_weeks",
                 "focus_no_frozen_charges"):
        con.execute(f"DROP TABLE IF EXISTS {temp}")
    rows, usage, corrections, line_grain, unpriced = counts
    return FocusRows(period, rows, usage, corrections, line_grain, unpriced, warnings=warnings)


#: rows (one per invoice line of a week) where the FOCUS rows do not add up to the invoice
#: line as issued (the view ``chargeback``): amount to the cent, gpu_seconds to the second;
#: read after :func:`build_focus_rows` of that week
ROWS_OFF_INVOICE = f"""
WITH focus AS (
    SELECT x_InvoiceLineKey AS line_key,
        CAST(floor(sum(BilledCost) * 100 + 0.5) AS DECIMAL(38, 0)) AS cents,
        CAST(floor(sum(PricingQuantity) * 3600 + 0.5) AS BIGINT) AS gpu_seconds,
        bool_or(x_Source = 'frozen_line') AS line_grain
    FROM {ROWS_TABLE} WHERE ChargeClass IS NULL GROUP BY ALL
), invoice AS (
    SELECT concat_ws('|', period, cost_centre, team, person, domain, gpu_model,
                     coalesce(CAST(rate_valid_from AS VARCHAR), ''),
                     coalesce(CAST(rate_per_gpu_hour AS VARCHAR), ''), currency) AS line_key,
        CAST(coalesce(amount, 0) * 100 AS DECIMAL(38, 0)) AS cents, gpu_seconds
    FROM chargeback WHERE period = $period
)
SELECT line_key, i.cents / 100 AS invoice_amount, f.cents / 100 AS focus_amount,
    i.gpu_seconds AS invoice_gpu_seconds, f.gpu_seconds AS focus_gpu_seconds
FROM invoice AS i FULL JOIN focus AS f USING (line_key)
WHERE i.cents IS DISTINCT FROM f.cents
    OR (NOT coalesce(f.line_grain, false) AND i.gpu_seconds IS DISTINCT FROM f.gpu_seconds)
ORDER BY line_key
"""
