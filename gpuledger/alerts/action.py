"""The action hook: the site's command run once per idle incident (``[gpuledger.alerts.action]``,
off by default), e.g. ``["scancel", "{job_id}"]`` or ``["kubectl", "delete", "pod", "-n",
"{namespace}", "{pod}"]``.

The argv is filled from the allocation and run without a shell (a job name cannot inject
anything), with a timeout; ``alert_actions`` logs the intent first, then the exit code and the
tails of stdout/stderr. A dry run logs it as ``dry_run`` and runs nothing.
"""

import subprocess
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import duckdb

from gpuledger.alerts.evaluate import HeldAllocation
from gpuledger.alerts.log import now
from gpuledger.site.alerts import ActionSite
from models.runner import transaction
from models.schema import ALERT_ACTIONS

TAIL = 2000
Connect = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]


@dataclass(frozen=True)
class ActionResult:
    command: tuple[str, ...]
    status: str  # done | failed | timeout | dry_run | error
    exit_code: int | None
    stdout_tail: str
    stderr_tail: str

    def describe(self) -> str:
        shown = " ".join(self.command)
        if self.status == "dry_run":
            return f"would run {shown} (dry run)"
        if self.status == "done":
            return f"ran {shown} (exit code 0)"
        return f"tried to run {shown}: {self.status}" + (
            f" (exit code {self.exit_code})" if self.exit_code is not None else "")


def argv(template: tuple[str, ...], a: HeldAllocation) -> tuple[str, ...]:
    values = {"cluster": a.cluster, "job_id": a.job_id or "", "node": a.node,
              "user": a.user or "", "account": a.account or "", "namespace": a.namespace or "",
              "pod": a.pod or "", "pod_uid": a.ident if a.domain == "kubernetes" else ""}
    return tuple(part.format(**values) for part in template)


def _tail(text: str | bytes | None) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return text[-TAIL:]


def run_action(connect: Connect, key: str, a: HeldAllocation, settings: ActionSite, *,
               dry_run: bool) -> ActionResult | None:
    """Run (or, in a dry run, log) the domain's command for this incident; None when the
    domain has no command. Intent and outcome are two short transactions."""
    template = settings.command(a.domain)
    if not template:
        return None
    command = argv(template, a)
    action_id = uuid.uuid4().hex
    started = now()
    with connect() as con, transaction(con):
        con.execute(
            f"INSERT INTO {ALERT_ACTIONS.name} (action_id, alert_key, domain, cluster, allocation,"
            " node, command, dry_run, status, started_at, finished_at) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [action_id, key, a.domain, a.cluster, a.ident, a.node, list(command), dry_run,
             "dry_run" if dry_run else "pending", started, started if dry_run else None])
    if dry_run:
        return ActionResult(command, "dry_run", None, "", "")
    try:
        done = subprocess.run(list(command), capture_output=True, timeout=settings.timeout_s,
                              check=False, shell=False)
        result = ActionResult(command, "done" if done.returncode == 0 else "failed",
                              done.returncode, _tail(done.stdout), _tail(done.stderr))
    except subprocess.TimeoutExpired as exc:
        result = ActionResult(command, "timeout", None, _tail(exc.stdout),
                              _tail(exc.stderr) + f"\ntimed out after {settings.timeout_s:g} s")
    except OSError as exc:
        result = ActionResult(command, "error", None, "", str(exc))
    with connect() as con, transaction(con):
        con.execute(
            f"UPDATE {ALERT_ACTIONS.name} SET status = ?, exit_code = ?, stdout_tail = ?, "
            "stderr_tail = ?, finished_at = ? WHERE action_id = ?",
            [result.status, result.exit_code, result.stdout_tail, result.stderr_tail, now(),
             action_id])
    return result


def action_logged(con: duckdb.DuckDBPyConnection, key: str, *, dry_run: bool) -> bool:
    """The incident's action already ran (or was logged by a dry run, for a dry run)."""
    statuses = ["pending", "done", "failed", "timeout", "error"] + (["dry_run"] if dry_run
                                                                   else [])
    return bool(con.execute(
        f"SELECT count(*) FROM {ALERT_ACTIONS.name} WHERE alert_key = ? AND "
        "list_contains(?, status)", [key, statuses]).fetchone()[0])
