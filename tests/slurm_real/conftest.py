"""The `real_slurm` session fixture: a REAL Slurm 22.05 with accounting on localhost.

Once per session it runs `tests/services/slurm/start-slurm.sh` (installs the Debian packages
if missing, starts munge, MariaDB, slurmdbd, slurmctld and four slurmd with fake a100/h100
GPUs) and `submit-jobs.sh` (a varied job set driven to its end states, then the sreport
rollup). At session end it runs `stop-slurm.sh --purge`.

Where Slurm cannot run (not Linux, not root, packages missing and no apt-get) the fixture
skips, unless GPULEDGER_REQUIRE_SERVICES=1 (set in CI): then it fails.
The state folder (GPULEDGER_SLURM_DIR, default /tmp/gpuledger-slurm) is wiped at start, so
the accounting DB holds only this session's jobs. Set GPULEDGER_SLURM_KEEP=1 to leave the
cluster running after the session (debugging).
Costs about 1.5-2 min per session on a 2-core machine (up to 4 min more when it starts in the
last 4 minutes of an hour: the job set waits for the next hour, see submit-jobs.sh).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType

import pytest

from connectors.slurm.fields import SACCT_ENVIRONMENT, SACCT_FIELDS, sacct_command

ROOT = Path(__file__).resolve().parents[2]
SERVICE_DIR = ROOT / "tests" / "services" / "slurm"

# the simulator's sacct-P.txt order: JobName third, so a '|' in a name really shifts fields
CLASSIC_FIELDS: tuple[str, ...] = (
    "JobID", "JobIDRaw", "JobName", "User",
    *(f for f in SACCT_FIELDS if f not in {"JobID", "JobIDRaw", "JobName", "User"}),
)

START_TIMEOUT_S = 1200  # includes apt-get update + install on a fresh machine
SUBMIT_TIMEOUT_S = 600
STOP_TIMEOUT_S = 180
QUERY_TIMEOUT_S = 60


def _iso(ts: datetime) -> str:
    """Slurm's -S/-E/start=/end= form, in UTC (the helpers run the tools with TZ=UTC)."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


@dataclass(frozen=True)
class RealSlurm:
    """The running cluster and the job set that submit-jobs.sh left in its accounting."""

    cluster: str
    window_start: datetime  # UTC; every job of the set ran inside [window_start, window_end)
    window_end: datetime
    report_start: datetime  # UTC, whole hours: the rolled-up range to give sreport
    report_end: datetime
    manifest: Mapping[str, str]  # kind -> job id, e.g. "requeue" -> "2" (array: the array id)
    state_dir: Path
    # `TZ=UTC SLURM_TIME_FORMAT=%s scontrol --all --details show job`, taken by submit-jobs.sh
    # while the gpus-5-two-node job ran (its GPUs per node, which sacct does not keep)
    scontrol_snapshot: Path

    def job_id(self, kind: str) -> str:
        return self.manifest[kind]

    def _run(self, tool: str, args: Sequence[str], env: Mapping[str, str] | None,
             timeout: float) -> str:
        full_env = {**os.environ, "TZ": "UTC", **(env or {})}
        proc = subprocess.run(
            [tool, *args], capture_output=True, env=full_env, timeout=timeout, check=False
        )
        out = proc.stdout.decode("utf-8")
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace")
            msg = f"{tool} {' '.join(args)} exited {proc.returncode}: {err.strip()}"
            raise RuntimeError(msg)
        return out

    def sacct(self, args: Sequence[str], *, env: Mapping[str, str] | None = None,
              timeout: float = QUERY_TIMEOUT_S) -> str:
        """Run sacct (TZ=UTC unless env overrides it) and return its stdout."""
        return self._run("sacct", args, env, timeout)

    def sreport(self, args: Sequence[str], *, env: Mapping[str, str] | None = None,
                timeout: float = QUERY_TIMEOUT_S) -> str:
        """Run sreport (TZ=UTC unless env overrides it) and return its stdout."""
        return self._run("sreport", args, env, timeout)

    def window_args(self) -> list[str]:
        """sacct -S/-E for the job set's window (UTC, for the default TZ=UTC)."""
        return ["-S", _iso(self.window_start), "-E", _iso(self.window_end)]

    def report_args(self) -> list[str]:
        """sreport start=/end= for the rolled-up hours (UTC, for the default TZ=UTC)."""
        return [f"start={_iso(self.report_start)}", f"end={_iso(self.report_end)}"]

    def sacct_unitsep(self) -> str:
        """gpuledger's own extraction (connectors.slurm.fields.sacct_command, with
        SACCT_ENVIRONMENT) over the window: SACCT_FIELDS order, 0x1f, epoch seconds."""
        argv = sacct_command(_iso(self.window_start), _iso(self.window_end))
        assert argv[0] == "sacct"
        return self.sacct(argv[1:], env=SACCT_ENVIRONMENT)


def _cannot_run_reason() -> str | None:
    if platform.system() != "Linux":
        return f"real Slurm needs Linux (this is {platform.system()})"
    if os.geteuid() != 0:
        return "real Slurm needs root (writes /etc/slurm, starts daemons, adds users)"
    have_slurm = all(
        shutil.which(t, path="/usr/sbin:/usr/bin:/sbin:/bin")
        for t in ("slurmctld", "slurmd", "slurmdbd", "sacct", "mariadbd", "munged")
    )
    if not have_slurm and shutil.which("apt-get") is None:
        return "Slurm/MariaDB/munge are not installed and there is no apt-get to install them"
    return None


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("GPULEDGER_REQUIRE_SERVICES") == "1":
        pytest.fail(f"GPULEDGER_REQUIRE_SERVICES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _script(name: str, *args: str, env: Mapping[str, str], timeout: float) -> None:
    try:
        proc = subprocess.run(
            ["bash", str(SERVICE_DIR / name), *args],
            stdin=subprocess.DEVNULL, capture_output=True, env=dict(env),
            timeout=timeout, check=False,
        )
    except subprocess.TimeoutExpired as exc:
        msg = f"{name} did not finish within {timeout:.0f} s"
        raise RuntimeError(msg) from exc
    if proc.returncode != 0:
        out = (proc.stdout + proc.stderr).decode("utf-8", "replace")
        msg = f"{name} {' '.join(args)} exited {proc.returncode}:\n{out[-6000:]}"
        raise RuntimeError(msg)


def _read_env_file(path: Path) -> dict[str, str]:
    pairs = (ln.split("=", 1) for ln in path.read_text().splitlines() if "=" in ln)
    return {k.strip(): v.strip() for k, v in pairs}


def _read_manifest(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    kind_i, id_i = header.index("kind"), header.index("jobid")
    return {cols[kind_i]: cols[id_i] for cols in (ln.split("\t") for ln in lines[1:] if ln)}


def _epoch(value: str) -> datetime:
    return datetime.fromtimestamp(int(value), tz=UTC)


@pytest.fixture(scope="session")
def sacct_fields() -> tuple[str, ...]:
    return SACCT_FIELDS


@pytest.fixture(scope="session")
def classic_fields() -> tuple[str, ...]:
    return CLASSIC_FIELDS


@pytest.fixture(scope="session")
def real_slurm() -> Iterator[RealSlurm]:
    reason = _cannot_run_reason()
    if reason is not None:
        _skip_or_fail(reason)
    state_dir = Path(os.environ.get("GPULEDGER_SLURM_DIR", "/tmp/gpuledger-slurm"))
    # FRESH: wipe any earlier accounting DB, so sacct and sreport see only this job set
    env = {**os.environ, "GPULEDGER_SLURM_DIR": str(state_dir), "GPULEDGER_SLURM_FRESH": "1"}
    out_dir = state_dir / "out"
    setup_ok = False
    try:
        _script("start-slurm.sh", env=env, timeout=START_TIMEOUT_S)
        _script("submit-jobs.sh", str(out_dir), env=env, timeout=SUBMIT_TIMEOUT_S)
        window = _read_env_file(out_dir / "window.env")
        cluster = RealSlurm(
            cluster=window["CLUSTER"],
            window_start=_epoch(window["WINDOW_START"]),
            window_end=_epoch(window["WINDOW_END"]),
            report_start=_epoch(window["ROLLUP_START"]),
            report_end=_epoch(window["ROLLUP_END"]),
            manifest=MappingProxyType(_read_manifest(out_dir / "manifest.tsv")),
            state_dir=state_dir,
            scontrol_snapshot=out_dir / "scontrol-snapshot.txt",
        )
        setup_ok = True
        yield cluster
    finally:
        if os.environ.get("GPULEDGER_SLURM_KEEP") != "1":
            try:
                _script("stop-slurm.sh", "--purge", env=env, timeout=STOP_TIMEOUT_S)
            except RuntimeError:
                if setup_ok:  # otherwise keep the setup error, not this one
                    raise
