"""Alerts to the owners of idle GPUs: what was sent, delivered and done."""

from models.schema.core import Table

# --- alerts to the owners of idle GPUs (gpuledger/alerts/, docs/alerts.md)

ALERT_LOG = Table(
    "alert_log",
    (
        ("attempt_id", "VARCHAR"),
        ("alert_key", "VARCHAR"),
        ("kind", "VARCHAR"),
        ("family", "VARCHAR"),
        ("domain", "VARCHAR"),
        ("cluster", "VARCHAR"),
        ("allocation", "VARCHAR"),
        ("workload", "VARCHAR"),
        ("node", "VARCHAR"),
        ("gpus", "VARCHAR[]"),
        ("incident_start", "TIMESTAMP"),
        ("idle_since", "TIMESTAMP"),
        ("as_of", "TIMESTAMP"),
        ("idle_minutes", "DOUBLE"),
        ("gpu_hours_idle", "DOUBLE"),
        ("cost", "DECIMAL(18,2)"),
        ("currency", "VARCHAR"),
        ("person", "VARCHAR"),
        ("team", "VARCHAR"),
        ("cost_centre", "VARCHAR"),
        ("recipients_to", "VARCHAR[]"),
        ("recipients_cc", "VARCHAR[]"),
        ("recipient_source", "VARCHAR"),
        ("link", "VARCHAR"),
        ("dry_run", "BOOLEAN"),
        ("status", "VARCHAR"),
        ("detail", "VARCHAR"),
        ("logged_at", "TIMESTAMP"),
        ("finished_at", "TIMESTAMP"),
    ),
    key=("attempt_id",),
    doc="Every alert gpuledger meant to send (one row per attempt): the dedupe key (family, "
    "allocation, node, incident start, level), what it said, to whom (recipient_source: "
    "person, team or admins), and the outcome: status pending (intent recorded, delivery "
    "under way or interrupted), sent, failed (retried next tick) or dry_run (logged only).",
)

ALERT_DELIVERIES = Table(
    "alert_deliveries",
    (
        ("attempt_id", "VARCHAR"),
        ("alert_key", "VARCHAR"),
        ("channel", "VARCHAR"),
        ("ok", "BOOLEAN"),
        ("detail", "VARCHAR"),
        ("finished_at", "TIMESTAMP"),
    ),
    key=("attempt_id", "channel"),
    doc="Per alert attempt and channel (smtp, webhook) the outcome of the delivery: the "
    "server's reply, the HTTP status or the error.",
)

ALERT_ACTIONS = Table(
    "alert_actions",
    (
        ("action_id", "VARCHAR"),
        ("alert_key", "VARCHAR"),
        ("domain", "VARCHAR"),
        ("cluster", "VARCHAR"),
        ("allocation", "VARCHAR"),
        ("node", "VARCHAR"),
        ("command", "VARCHAR[]"),
        ("dry_run", "BOOLEAN"),
        ("status", "VARCHAR"),
        ("exit_code", "INTEGER"),
        ("stdout_tail", "VARCHAR"),
        ("stderr_tail", "VARCHAR"),
        ("started_at", "TIMESTAMP"),
        ("finished_at", "TIMESTAMP"),
    ),
    key=("action_id",),
    doc="The action hook ([gpuledger.alerts.action]): the command run once per idle incident "
    "(never through a shell), its exit code and the tails of its output; status pending, "
    "done, failed, timeout or dry_run (logged, not run).",
)

ALERT_TABLES: tuple[Table, ...] = (ALERT_LOG, ALERT_DELIVERIES, ALERT_ACTIONS)
