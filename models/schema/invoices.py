"""Invoices: the chargeback lines, shared-GPU summaries, closed weeks (frozen lines and
adjustments) and the views that issue them."""

from models.schema.accounting import DATA_QUALITY_DAYS
from models.schema.core import Table, View

CHARGEBACK = Table(
    "chargeback_periods",
    (
        ("period_kind", "VARCHAR"),
        ("period", "VARCHAR"),
        ("period_start", "DATE"),
        ("cost_centre", "VARCHAR"),
        ("team", "VARCHAR"),
        ("person", "VARCHAR"),
        ("domain", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("rate_valid_from", "DATE"),
        ("rate_per_gpu_hour", "DECIMAL(18,6)"),
        ("currency", "VARCHAR"),
        ("gpu_seconds", "BIGINT"),
        ("gpu_hours", "DECIMAL(18,6)"),
        ("allocations", "BIGINT"),
        ("amount", "DECIMAL(18,2)"),
        ("measured_gpu_hours", "DECIMAL(18,6)"),
        ("busy_gpu_hours", "DECIMAL(18,6)"),
        ("idle_gpu_hours", "DECIMAL(18,6)"),
        # shared GPUs: units (MIG instances, replicas, shards) x hours in the line; 0: whole
        # GPUs only (docs/shared-gpus.md). Last: closes frozen before it have it NULL
        ("slice_hours", "DECIMAL(18,6)"),
    ),
    key=("period_kind", "period", "cost_centre", "team", "person", "domain", "gpu_model",
         "rate_valid_from", "rate_per_gpu_hour"),
    doc="Invoice lines of every period kind (day, ISO week, month) and owner (the view "
    "`chargeback` shows the ISO-week lines); one rate per line, amount "
    "rounded once per line (on allocated GPU-seconds only). measured/busy/idle GPU-hours are "
    "shown beside it: the allocated hours dcgm-exporter covered, and their busy and idle parts.",
)

SHARED_GPU_DAILY = Table(
    "shared_gpu_daily",
    (
        ("day", "DATE"),
        ("cluster", "VARCHAR"),
        ("domain", "VARCHAR"),
        ("sharing", "VARCHAR"),  # whole, mig, time_slicing, mps, shard
        ("slice_profile", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("currency", "VARCHAR"),  # of the rate; '' when unpriced
        ("allocations", "BIGINT"),
        ("slice_seconds", "BIGINT"),  # units (instances, replicas, shards) x seconds
        ("physical_gpu_seconds", "DECIMAL(18,3)"),
        ("busy_slice_seconds", "DECIMAL(18,6)"),
        ("amount", "DECIMAL(18,2)"),
        ("cost_per_busy_slice_hour", "DOUBLE"),
    ),
    key=("day", "cluster", "domain", "sharing", "slice_profile", "gpu_model", "currency"),
    doc="Shared GPUs per day (docs/shared-gpus.md): allocations, slice-seconds, the physical "
    "GPU-seconds charged, busy slice-seconds and the amount per sharing mode and MIG profile, "
    "whole GPUs included (sharing 'whole'), so the share of the estate that runs shared and the "
    "cost per busy slice-hour read off one table.",
)

# --- closed periods (models/closing.py; docs/accounting.md "Closed periods and adjustments") ---

CLOSED_PERIODS = Table(
    "closed_periods",
    (
        ("period", "VARCHAR"),
        ("period_start", "DATE"),
        ("period_end", "DATE"),
        ("revision", "INTEGER"),
        ("closed_at", "TIMESTAMP"),
        ("closed_by", "VARCHAR"),
        ("run_id", "VARCHAR"),
        ("reason", "VARCHAR"),
        ("lines", "BIGINT"),
        ("gpu_seconds", "BIGINT"),
        ("amount", "DECIMAL(18,2)"),
        ("checksum", "VARCHAR"),
    ),
    key=("period", "revision"),
    doc="Every close of an ISO week (period YYYY-Www, [period_start, period_end)): revision 1 "
    "is the weekly close, each explicit re-close adds one with who and why. The latest revision's "
    "frozen lines are the week's invoice; checksum is a sha256 of those lines and of the "
    "adjustment lines the week carries.",
)

FROZEN_INVOICE_LINES = Table(
    "frozen_invoice_lines",
    (("closed_period", "VARCHAR"), ("revision", "INTEGER"), *CHARGEBACK.columns),
    key=("closed_period", "revision", *CHARGEBACK.key),
    doc="The week and day invoice lines of a closed week exactly as issued at its close "
    "(revision of closed_periods); late data never changes them (it lands in "
    "invoice_adjustments).",
)

INVOICE_ADJUSTMENTS = Table(
    "invoice_adjustments",
    (
        ("period", "VARCHAR"),
        ("period_start", "DATE"),
        ("original_period", "VARCHAR"),
        ("original_period_start", "DATE"),
        ("cost_centre", "VARCHAR"),
        ("team", "VARCHAR"),
        ("person", "VARCHAR"),
        ("domain", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("rate_valid_from", "DATE"),
        ("rate_per_gpu_hour", "DECIMAL(18,6)"),
        ("currency", "VARCHAR"),
        ("gpu_seconds", "BIGINT"),
        ("gpu_hours", "DECIMAL(18,6)"),
        ("amount", "DECIMAL(18,2)"),
        ("reason", "VARCHAR"),
        ("run_id", "VARCHAR"),
        ("created_at", "TIMESTAMP"),
    ),
    key=("period", "original_period", "cost_centre", "team", "person", "domain", "gpu_model",
         "rate_valid_from", "rate_per_gpu_hour", "currency"),
    doc="Adjustment lines: what late data changed in a closed week (original_period), per "
    "invoice line key, carried by the next open week (period): the rebuilt line minus the "
    "frozen line minus adjustments already carried by closed weeks. Signed GPU-seconds and "
    "amount; reason and run say why and who.",
)

# the allocation-level charges of a closed week, frozen by the close (models/focus.py,
# models/sql/focus_charges.sql; docs/focus.md): its FOCUS file reproduces what was issued
FROZEN_ALLOCATION_CHARGES = Table(
    "frozen_allocation_charges",
    (
        ("closed_period", "VARCHAR"),
        ("revision", "INTEGER"),
        ("day", "DATE"),
        ("domain", "VARCHAR"),
        ("cluster", "VARCHAR"),
        ("source_key", "VARCHAR"),
        ("job_id", "VARCHAR"),
        ("name", "VARCHAR"),
        ("node", "VARCHAR"),
        ("start_ts", "TIMESTAMP"),
        ("end_ts", "TIMESTAMP"),
        ("physical_gpu_model", "VARCHAR"),
        ("gpu_model", "VARCHAR"),  # the model priced (a MIG profile the rate card prices)
        ("profile_priced", "BOOLEAN"),
        ("sharing", "VARCHAR"),
        ("slice_profile", "VARCHAR"),
        ("slices", "BIGINT"),
        ("gpus", "BIGINT"),
        ("gpu_seconds", "BIGINT"),
        ("slurm_user", "VARCHAR"),
        ("slurm_account", "VARCHAR"),
        ("qos", "VARCHAR"),
        ("k8s_namespace", "VARCHAR"),
        ("kueue_queue", "VARCHAR"),
        ("person", "VARCHAR"),
        ("team", "VARCHAR"),
        ("cost_centre", "VARCHAR"),
        ("rate_valid_from", "DATE"),
        ("rate_per_gpu_hour", "DECIMAL(18,6)"),
        ("currency", "VARCHAR"),
        ("charged_ms", "BIGINT"),
        ("measured_gpu_seconds", "DECIMAL(38,6)"),
        ("busy_gpu_seconds", "DECIMAL(38,6)"),
    ),
    key=("closed_period", "revision", "day", "domain", "source_key", "node", "start_ts"),
    doc="The allocation pieces (a Slurm run or pod on one node and UTC day) a closed week's "
    "invoice lines charged, as they were at its close (revision of closed_periods): the FOCUS "
    "export of a closed week reads them, so it reproduces what was issued (docs/focus.md). "
    "charged_ms is what the rate multiplies; per invoice line they sum to its gpu_seconds and "
    "amount. A week closed before this table existed has none (exported at line grain).",
)


# The invoice: one line per ISO week, owner, domain, GPU model and rate. Summing it never counts
# a GPU-second twice (chargeback_periods holds the same time as day, week and month lines).
_LINE_COLUMNS = ", ".join(f'"{c}"' for c in CHARGEBACK.column_names)

# What was invoiced: the ledger's lines, except the day and week lines of a closed week, which
# are the frozen lines of its latest close (month lines always follow the ledger).
# The one rule of the provisional mark: a line is provisional when GPU-time of its owner, domain
# and GPU model lies on a provisional (cluster, day) of data_quality_days inside its period.
_OWNER_KEYS = ("cost_centre", "team", "person", "domain", "gpu_model")
_SAME_OWNER = " AND ".join(f"l.{k} IS NOT DISTINCT FROM d.{k}" for k in _OWNER_KEYS)
_PROVISIONAL_MARKS = (
    f"provisional_days AS (SELECT DISTINCT a.day, a.cluster, q.reasons, "
    f"{', '.join('a.' + k for k in _OWNER_KEYS)} FROM allocations AS a "
    f"JOIN {DATA_QUALITY_DAYS.name} AS q ON q.cluster = a.cluster AND q.day = a.day "
    "WHERE q.provisional), "
    "periods AS (SELECT DISTINCT period_kind, period, period_start, "
    f"{', '.join(_OWNER_KEYS)}, CASE period_kind WHEN 'day' THEN period_start + 1 "
    "WHEN 'week' THEN period_start + 7 ELSE (period_start + INTERVAL 1 MONTH)::DATE END "
    "AS period_end FROM issued), "
    f"marks AS (SELECT l.period_kind, l.period, {', '.join('l.' + k for k in _OWNER_KEYS)}, "
    "string_agg(DISTINCT strftime(d.day, '%Y-%m-%d') || ' ' || d.cluster || ': ' || d.reasons, "
    "' | ' ORDER BY strftime(d.day, '%Y-%m-%d') || ' ' || d.cluster || ': ' || d.reasons) "
    "AS reasons FROM periods AS l JOIN provisional_days AS d ON d.day >= l.period_start "
    f"AND d.day < l.period_end AND {_SAME_OWNER} GROUP BY ALL)"
)

INVOICE_LINES_VIEW = View(
    "invoice_lines",
    f"WITH issued AS (SELECT {_LINE_COLUMNS} FROM chargeback_periods AS c "
    "WHERE c.period_kind = 'month' "
    "OR NOT EXISTS (SELECT 1 FROM closed_periods AS p WHERE c.period_start >= p.period_start "
    "AND c.period_start < p.period_end) "
    f"UNION ALL SELECT {_LINE_COLUMNS} FROM frozen_invoice_lines AS f WHERE f.revision = "
    "(SELECT max(p.revision) FROM closed_periods AS p WHERE p.period = f.closed_period)), "
    f"{_PROVISIONAL_MARKS} "
    "SELECT i.*, m.reasons IS NOT NULL AS provisional, m.reasons AS provisional_reasons "
    "FROM issued AS i LEFT JOIN marks AS m ON m.period_kind = i.period_kind "
    "AND m.period = i.period AND "
    + " AND ".join(f"m.{k} IS NOT DISTINCT FROM i.{k}" for k in _OWNER_KEYS),
    doc="The invoice lines as issued: chargeback_periods for open weeks and months, the frozen "
    "day and week lines (frozen_invoice_lines, latest revision) for closed weeks; "
    "`provisional` (with `provisional_reasons`: 'day cluster: reasons', ' | '-joined) when "
    "GPU-time of the line's owner, domain and GPU model lies on a provisional day of "
    "data_quality_days.",
)

CHARGEBACK_VIEW = View(
    "chargeback",
    "SELECT * FROM invoice_lines WHERE period_kind = 'week'",
    doc="The weekly invoice lines (ISO week, Monday 00:00 UTC) as issued: a closed week's "
    "frozen lines, an open week's lines from the ledger (invoice_lines where period_kind = "
    "'week').",
)

ALL_VIEWS: tuple[View, ...] = (INVOICE_LINES_VIEW, CHARGEBACK_VIEW)
