"""``gpuledger doctor``: a cluster's Slurm source, live (through the prefix) or dump files.

Live: the prefix runs a command, the Slurm host's clock (``date +%s`` through the prefix) agrees
with ours, ``sacct --version`` answers, a sacct of the last hour in gpuledger's own extraction
parses with the project's parser (header aliases, delimiter, sanity limits), sreport answers;
a sample of jobs with their GPUs is printed.
"""

import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from connectors.errors import SourceError
from connectors.slurm.commands import CommandRunner
from connectors.slurm.fields import SACCT_ENVIRONMENT, sacct_command
from connectors.slurm.header import SacctFormatError
from connectors.slurm.parse import SacctParse, parse_sacct
from connectors.slurm.sreport import parse_account_utilization_by_user, parse_cluster_utilization
from gpuledger.doctor.checks import SAMPLE_SIZE, Check, describe_reject, fail, first_line, ok, warn
from gpuledger.ingest.slurm.run import sreport_commands
from gpuledger.site import SlurmSite
from gpuledger.site.sources import slurm_limits

SKEW_WARN_S = 10.0  # above this a clock is worth fixing; above the sanity limit lines are lost
PROBE_TIMEOUT_S = 60.0  # one doctor probe (the ingest's own timeout may be much longer)
_FMT = "%Y-%m-%dT%H:%M:%S"


def _tool(s: SlurmSite, name: str) -> str:
    """sreport beside a configured sacct path (``/opt/slurm/bin/sacct``), else on PATH."""
    if name == "sacct":
        return s.sacct
    return str(Path(s.sacct).with_name(name)) if "/" in s.sacct else name


def job_lines(runs: pl.DataFrame, limit: int = SAMPLE_SIZE) -> list[str]:
    """Jobs a person can recognise: GPU jobs first, latest first."""
    if runs.height == 0:
        return []
    picked = runs.sort(["alloc_gpus", "start"], descending=True, nulls_last=True).head(limit)
    lines = []
    for r in picked.iter_rows(named=True):
        gpus = r["alloc_gpus"] or 0
        types = ", ".join(f"{t['model']}:{t['gpus']}" for t in r.get("alloc_gpu_types") or []
                          if isinstance(t, dict))
        types = f" ({types})" if types else ""
        lines.append(
            f"job {r['job_id']} {r['user'] or '?'}/{r['account'] or '?'} partition "
            f"{r['partition'] or '?'} {r['state']}: {gpus} GPU(s){types} on "
            f"{r['nodelist'] or 'no node'}, {_t(r['start'])} .. {_t(r['end'])}")
    return lines


def _t(value: object) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S}" if isinstance(value, datetime) else "-"


def _parsed(what: str, parsed: SacctParse, source: str, *, sample: bool = True) -> Check:
    """Lines, runs, steps and rejects; with ``sample``, no run is a WARN and jobs are shown."""
    runs, steps, rejects = parsed.runs.height, parsed.steps.height, parsed.rejects
    detail = (f"{source}: {parsed.lines_read} line(s), {runs} run(s), {steps} step(s), "
              f"{len(rejects)} rejected")
    gpu_runs = int((parsed.runs["alloc_gpus"].fill_null(0) > 0).sum()) if runs else 0
    samples = job_lines(parsed.runs) if sample else []
    if rejects:
        return warn(what, f"{detail} (kept in `rejects` on import); first: "
                    f"{describe_reject(rejects[0])}", samples)
    if runs == 0 and sample:
        return warn(what, f"{detail}: no job to show; fine on a quiet cluster, otherwise check "
                    "that sacct reads this cluster's slurmdbd", samples)
    return ok(what, f"{detail}, {gpu_runs} with GPUs", samples)


def slurm_checks(name: str, s: SlurmSite, *, now: datetime) -> Iterator[Check]:
    if s.mode == "dump":
        yield from _dump_checks(name, s)
        return
    where = f"[gpuledger.clusters.{name}.slurm]"
    label = f"slurm {name}"
    runner = CommandRunner.from_prefix(s.prefix, timeout_s=min(s.timeout_s, PROBE_TIMEOUT_S),
                                       retries=0)
    try:
        runner.run(["true"], {})
    except SourceError as exc:
        yield fail(f"{label}: prefix", f"the prefix {s.prefix!r} to run a command on the Slurm "
                   "host", first_line(exc), f"set {where}.prefix to a command that runs its "
                   "argument there, such as `ssh -o BatchMode=yes login-node` (key and known "
                   "host in place), or \"\" to run the Slurm commands on this host")
        return  # every other Slurm check goes through the prefix
    yield ok(f"{label}: prefix", f"`{s.prefix}` runs commands" if s.prefix
             else "none: the Slurm commands run on this host")
    yield _clock(label, runner, s, where)
    try:
        version = runner.run([_tool(s, "sacct"), "--version"], {}).strip()
    except SourceError as exc:
        yield fail(f"{label}: sacct --version", "sacct to answer", first_line(exc),
                   f"install the Slurm client on that host, or set {where}.sacct to its path")
        return
    yield ok(f"{label}: sacct --version", version or "(answered, printed nothing)")
    yield from _sacct_checks(label, runner, s, now)
    if s.sreport:
        yield _sreport(label, runner, s, where, now)


def _clock(label: str, runner: CommandRunner, s: SlurmSite, where: str) -> Check:
    what = f"{label}: clock"
    before = time.time()
    try:
        text = runner.run(["date", "+%s"], {}).strip()
    except SourceError as exc:
        return warn(what, f"could not read the Slurm host's clock ({first_line(exc)})")
    after = time.time()
    try:
        remote = float(text.split()[-1])
    except (ValueError, IndexError):
        return warn(what, f"expected seconds since the epoch from `date +%s`, found {text!r}")
    # date prints whole seconds: half the round trip and one second are no skew
    slack = (after - before) / 2 + 1.0
    skew = remote - (before + after) / 2
    limit = slurm_limits(s).clock_skew.total_seconds()
    shown = f"the Slurm host is {abs(skew):.0f} s {'ahead of' if skew > 0 else 'behind'} here"
    if abs(skew) > limit:
        return fail(what, f"clocks within {limit:g} s (the sanity limit clock_skew_s)", shown,
                    f"run NTP (chrony) on both hosts; until then sacct lines dated past the "
                    f"limit are rejected as in the future ({where}.limits)")
    if abs(skew) > max(SKEW_WARN_S, slack):
        return warn(what, f"{shown}; within the limit of {limit:g} s, but run NTP on both hosts")
    return ok(what, f"within {max(abs(skew), 0):.0f} s of here (date +%s through the prefix)")


def _sacct(runner: CommandRunner, s: SlurmSite, start: datetime, end: datetime
           ) -> SacctParse:
    """gpuledger's own extraction over ``[start, end)`` (naive UTC), parsed by the project's
    parser; SourceError when sacct fails, SacctFormatError/ValueError when it cannot be read."""
    argv = sacct_command(start.strftime(_FMT), end.strftime(_FMT))
    argv[0] = _tool(s, "sacct")
    text = runner.run(argv, SACCT_ENVIRONMENT)
    return parse_sacct(text, timezone="UTC", source_file=f"sacct {start:{_FMT}}..",
                             limits=slurm_limits(s))


def _sacct_checks(label: str, runner: CommandRunner, s: SlurmSite, now: datetime
                  ) -> Iterator[Check]:
    what = f"{label}: sacct last hour"
    start = now - timedelta(hours=1)
    try:
        parsed = _sacct(runner, s, start, now)
    except SacctFormatError as exc:
        yield fail(what, "sacct --parsable2 lines with a header", first_line(exc),
                   "run the extraction of docs/slurm.md by hand on the Slurm host and compare")
        return
    except SourceError as exc:
        yield fail(what, "sacct to list the last hour's jobs", first_line(exc),
                   "check that slurmdbd runs and this user may read all users' jobs "
                   "(PrivateData in slurmdbd.conf)")
        return
    shown = f"{start:%Y-%m-%d %H:%M} .. {now:%H:%M} UTC"
    yield _parsed(what, parsed, f"sacct {shown}", sample=False)  # a quiet hour is fine
    runs, window = parsed.runs, "the last hour"
    if runs.height == 0:  # a sample from the last day instead
        try:
            day = _sacct(runner, s, now - timedelta(days=1), now)
            runs, window = day.runs, "the last day"
        except (SourceError, ValueError):
            pass
    if runs.height == 0:
        yield warn(f"{label}: jobs", "no job in the last day: nothing to show (fine on an idle "
                   "cluster; otherwise check that sacct reads this cluster's slurmdbd)")
    else:
        yield ok(f"{label}: jobs", f"{runs.height} run(s) in {window}; GPU jobs first:",
                 job_lines(runs))


def _sreport(label: str, runner: CommandRunner, s: SlurmSite, where: str,
             now: datetime) -> Check:
    what = f"{label}: sreport"
    hour = now.replace(minute=0, second=0, microsecond=0)
    util_cmd, _ = sreport_commands(hour - timedelta(hours=1), hour)
    util_cmd[0] = _tool(s, "sreport")
    try:
        text = runner.run(util_cmd, {"TZ": "UTC"})
        rows = parse_cluster_utilization(text, source_file="sreport cluster utilization")
    except (SourceError, ValueError) as exc:
        return fail(what, "sreport cluster utilization to answer", first_line(exc),
                    f"check that slurmdbd rolls up usage, or set {where}.sreport = false")
    return ok(what, f"cluster utilization answers ({rows.height} row(s) for "
              f"{hour - timedelta(hours=1):%H:%M} .. {hour:%H:%M} UTC)")


def _dump_checks(name: str, s: SlurmSite) -> Iterator[Check]:
    where = f"[gpuledger.clusters.{name}.slurm]"
    label = f"slurm {name}"
    try:
        parsed = parse_sacct(Path(s.dump), timezone=s.dump_timezone,  # type: ignore[arg-type]
                             source_file=str(s.dump), limits=slurm_limits(s))
    except (SourceError, OSError, ValueError) as exc:
        yield fail(f"{label}: sacct dump", f"a sacct --parsable2 dump at {s.dump}",
                   first_line(exc), f"point {where}.dump at the file (relative to the site file)")
    else:
        yield _parsed(f"{label}: sacct dump", parsed, str(s.dump))
    for key, parser in (("sreport_utilization", parse_cluster_utilization),
                        ("sreport_accounts", parse_account_utilization_by_user)):
        path = getattr(s, key)
        if path is None:
            continue
        try:
            rows = parser(Path(path), timezone=s.dump_timezone, source_file=str(path))
        except (SourceError, OSError, ValueError) as exc:
            yield fail(f"{label}: {key}", f"an sreport -P file at {path}", first_line(exc),
                       f"point {where}.{key} at the file, or remove the key")
        else:
            yield ok(f"{label}: {key}", f"{path}: {rows.height} row(s)")
    if s.scontrol_snapshots is not None:
        folder = Path(s.scontrol_snapshots)
        found = sorted(folder.glob("scontrol-*.txt")) if folder.is_dir() else []
        if not found:
            yield warn(f"{label}: scontrol_snapshots", f"expected scontrol-*.txt files in "
                       f"{folder}, found none; fix: point {where}.scontrol_snapshots at them")
        else:
            yield ok(f"{label}: scontrol_snapshots", f"{folder}: {len(found)} snapshot(s)")
