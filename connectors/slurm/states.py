"""sacct ``State`` and exit codes as Polars expressions.

``State`` is an upper-case word, with ``by <uid>`` when a user cancelled the job
(``CANCELLED by 1001``; ``by 0`` is root). The uid goes to ``cancelled_by_uid``; the state keeps
the base word. Words outside :data:`KNOWN_STATES` still load (a newer Slurm may add some); only
text that is not an upper-case word is rejected.

Exit codes are ``code:signal`` (``1:0`` exited 1, ``0:9`` killed by SIGKILL); an empty text (seen on
some steps) is null.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

#: Base states and the state flags sacct prints in 22.05 (``job_state_string``).
KNOWN_STATES: frozenset[str] = frozenset({
    "PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT",
    "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REQUEUED",
    "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "REVOKED", "SPECIAL_EXIT", "STAGE_OUT",
    "STOPPED", "SIGNALING", "CONFIGURING", "COMPLETING", "POWER_UP_NODE", "RESV_DEL_HOLD",
    "UPDATE_DB", "LAUNCH_FAILED", "RECONFIG_FAIL",
})

#: States of allocations that have ended (the allocation will not change any more).
ENDED_STATES: frozenset[str] = frozenset({
    "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
    "DEADLINE", "OUT_OF_MEMORY", "REQUEUED", "REVOKED",
})

STATE_RE = r"^([A-Z][A-Z_]*)(?: by (\d+))?$"
EXIT_RE = r"^(\d+):(\d+)$"
STATE_EXPECTED = "expected an upper-case state such as COMPLETED or CANCELLED by 1001"
EXIT_EXPECTED = "expected code:signal such as 0:0 or 1:0"


@dataclass(frozen=True)
class StateExprs:
    state: pl.Expr
    cancelled_by_uid: pl.Expr
    bad: pl.Expr


def state_exprs(col: str) -> StateExprs:
    g = pl.col(col).str.extract_groups(STATE_RE)
    state = g.struct.field("1")
    return StateExprs(
        state=state,
        cancelled_by_uid=g.struct.field("2").cast(pl.Int64),
        bad=state.is_null(),
    )


def exit_exprs(col: str) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """(code, signal, bad); empty text is null, not bad."""
    c = pl.col(col)
    g = c.str.extract_groups(EXIT_RE)
    code = g.struct.field("1").cast(pl.Int64)
    signal = g.struct.field("2").cast(pl.Int64)
    bad = code.is_null() & (c != "")
    return code, signal, bad
