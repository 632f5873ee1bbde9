"""Property-based fuzz of the sacct parser (#13, item 9; PyPI hypothesis).

Generated dumps: any field order, ``|`` or the unit separator, stray separators in free-text
fields, the aliases NNodes/NCPUS (alone or beside their twins), optional fields missing, epoch or
naive ISO times, garbage and blank lines, impossible values (sanity limits). Invariants:

- the parser never raises, except SacctFormatError/SourceError for a bad header;
- every line after the header is a run, a step, a reject or blank
  (``lines_read == runs + steps + rejects + blank``);
- a line's columns never shift: a loaded line has the JobName (and GPUs, State) it was given;
- the batches of the streamed reader, and the streamed load into a ledger, equal the whole-dump
  parse and its load.

Deterministic in CI (``derandomize``, the ``ci`` profile of tests/conftest.py); examples are few
enough for the file to run in well under 30 s.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from unittest import mock

import duckdb
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import connectors.slurm.sacct_stream as stream_module
from connectors.errors import SourceError
from connectors.slurm.header import SacctFormatError
from connectors.slurm.parse import iter_sacct_batches, parse_sacct
from gpuledger.ingest.slurm import run as slurm_ingest
from models.runner import ensure_schema

T0 = 1_796_017_424  # 2026-11-30T05:43:44Z
AS_OF = datetime(1970, 1, 1) + timedelta(seconds=T0 + 86_400)
CLUSTER = "gpulab"

REQUIRED = ("JobID", "State", "Submit", "Start", "End", "NodeList", "AllocTRES", "Cluster",
            "JobName")  # JobName: the column whose shifting the fuzz watches
OPTIONAL = ("JobIDRaw", "User", "UID", "Account", "Partition", "QOS", "ExitCode",
            "DerivedExitCode", "Eligible", "Elapsed", "ElapsedRaw", "TimelimitRaw", "ReqTRES",
            "Reservation", "Reason", "Flags", "WCKey", "AdminComment")
#: How a dump may name the CPU and node counts: the field, its alias, both, or neither.
CPU_NAMES = ((), ("AllocCPUS",), ("NCPUS",), ("AllocCPUS", "NCPUS"), ("NCPUS", "AllocCPUS"))
NODE_NAMES = ((), ("AllocNodes",), ("NNodes",), ("AllocNodes", "NNodes"))

_TEXT = st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r")
FREE_TEXT = st.one_of(
    st.text(_TEXT, max_size=10),
    st.sampled_from(["train|resnet50", "a|b|c", "|", "eval, `v2` run", "モデル学習-ü-🚀",
                     "x\x1fy", "{}", '{"pods": ["ns/p"]}', " lead", "trail ", ""]),
)


@dataclass(frozen=True)
class Line:
    """What the fuzz wrote on one line: the kind and the values a loaded line must keep."""

    kind: str  # run, step, garbage, blank
    job_name: str = ""
    gpus: int | None = None
    state: str = ""


def _ts(value: int | None, iso: bool) -> str:
    if value is None:
        return "Unknown"
    if not iso:
        return str(value)
    return (datetime(1970, 1, 1) + timedelta(seconds=value)).strftime("%Y-%m-%dT%H:%M:%S")


def _hms(seconds: int) -> str:
    """sacct's ``[D-]HH:MM:SS``."""
    days, rest = divmod(seconds, 86_400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


@st.composite
def _job(draw: st.DrawFn, number: int, iso: bool) -> list[tuple[dict[str, str], Line]]:
    """One job: its allocation line and 0-2 steps, as sacct prints them."""
    submit = T0 + number * 10
    started = draw(st.booleans()) or draw(st.booleans())
    start = submit + draw(st.integers(0, 100)) if started else None
    ended = started and draw(st.integers(0, 4)) > 0
    duration = draw(st.one_of(st.integers(0, 5000), st.just(400 * 86_400)))  # absurd, now and then
    end = start + duration if ended and start is not None else None
    if ended and draw(st.integers(0, 9)) == 0 and start is not None:
        end = start - 100  # End before Start
    state = ("PENDING" if not started else "RUNNING" if not ended
             else draw(st.sampled_from(["COMPLETED", "FAILED", "TIMEOUT", "CANCELLED by 1001",
                                        "NODE_FAIL", "OUT_OF_MEMORY"])))
    nodelist, n_nodes = ("None assigned", 0) if not started else draw(st.sampled_from(
        [("a100-01", 1), ("a100-[01-02]", 2), ("h100-01", 1), ("gpu-[01-04,07]", 5)]))
    gpus = draw(st.one_of(st.integers(0, 8), st.just(99_999_999_999))) if started else 0
    tres = "" if not started else (f"billing=4,cpu=2,gres/gpu={gpus},mem=2000M,node={n_nodes}"
                                   if gpus else f"billing=4,cpu=2,mem=2000M,node={n_nodes}")
    elapsed = (end - start) if (start is not None and end is not None and end >= start) else 0
    name = draw(FREE_TEXT)
    alloc = {
        "JobID": str(number), "JobIDRaw": str(number), "User": "alice", "UID": "20001",
        "Account": "physics", "Partition": "gpu", "QOS": "normal", "State": state,
        "ExitCode": "0:0", "DerivedExitCode": "0:0", "Submit": _ts(submit, iso),
        "Eligible": _ts(submit, iso), "Start": _ts(start, iso), "End": _ts(end, iso),
        "Elapsed": _hms(elapsed), "ElapsedRaw": str(elapsed), "TimelimitRaw": "60",
        "AllocCPUS": "2" if started else "0", "NCPUS": "2" if started else "0",
        "AllocNodes": str(n_nodes), "NNodes": str(n_nodes), "NodeList": nodelist,
        "AllocTRES": tres, "ReqTRES": "billing=4,cpu=2,mem=2000M,node=1", "Cluster": CLUSTER,
        "Reservation": "", "Reason": "None", "Flags": "SchedMain",
        "WCKey": draw(st.sampled_from(["", "proj1"])), "JobName": name,
        "AdminComment": draw(st.sampled_from(["", '{"pods": ["team-a/p-1"]}', "JS1:abc"])),
    }
    out = [(alloc, Line("run", name, gpus if started else 0, state.split(" ")[0]))]
    steps = draw(st.sampled_from([(), ("batch",), ("batch", "0"), ("extern", "0")]))
    for step_id in steps if started else ():
        step_name = draw(FREE_TEXT) if step_id == "0" else step_id
        step = {**alloc, "JobID": f"{number}.{step_id}", "JobIDRaw": f"{number}.{step_id}",
                "JobName": step_name, "User": "", "UID": "", "QOS": "", "Partition": "",
                "AdminComment": "", "Reason": "", "Flags": "", "TimelimitRaw": "",
                "ReqTRES": ""}
        out.append((step, Line("step", step_name)))
    return out


@st.composite
def dumps(draw: st.DrawFn) -> tuple[str, dict[int, Line], str]:
    """(dump text, what each line number holds, delimiter)."""
    sep = draw(st.sampled_from(["|", "\x1f"]))
    fields = [*REQUIRED, *draw(st.lists(st.sampled_from(OPTIONAL), unique=True, max_size=8)),
              *draw(st.sampled_from(CPU_NAMES)), *draw(st.sampled_from(NODE_NAMES))]
    fields = draw(st.permutations(fields))
    iso = draw(st.booleans())
    rows: list[tuple[dict[str, str] | None, Line]] = []
    for number in range(1, draw(st.integers(1, 8)) + 1):
        rows += draw(_job(1000 + number, iso))
    for _ in range(draw(st.integers(0, 3))):  # garbage and blank lines, anywhere
        junk = draw(st.one_of(st.text(_TEXT, max_size=40), st.just("")))
        rows.insert(draw(st.integers(0, len(rows))), (None, Line("blank" if junk == "" else
                                                                 "garbage", junk)))
    lines = [sep.join(fields)]
    expected: dict[int, Line] = {}
    for no, (row, line) in enumerate(rows, start=2):
        lines.append(line.job_name if row is None else sep.join(row[f] for f in fields))
        expected[no] = line
    return "\n".join(lines) + "\n", expected, sep


#: Examples per property: enough to meet every shape above in CI, few enough for < 30 s on a
#: busy 2-core machine (HYPOTHESIS_PROFILE=explore with more examples searches harder).
FUZZ = settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow])


def _assert_accounted(parsed, expected: dict[int, Line]) -> None:
    parsed.check_counts()
    assert parsed.lines_read == len(expected)
    assert parsed.blank_lines == sum(1 for line in expected.values() if line.kind == "blank")
    seen = ([("run", n) for n in parsed.runs["line_no"].to_list()]
            + [("step", n) for n in parsed.steps["line_no"].to_list()]
            + [("reject", r.line_no) for r in parsed.rejects])
    numbers = [n for _, n in seen]
    assert len(numbers) == len(set(numbers)), "a line counted twice"
    for kind, n in seen:
        if expected[n].kind in ("run", "step"):
            assert kind in (expected[n].kind, "reject"), (n, kind, expected[n])


@FUZZ
@given(dumps())
def test_every_line_is_a_run_a_step_or_a_reject_and_columns_never_shift(case):
    text, expected, _ = case
    parsed = parse_sacct(text, source_file="fuzz.txt")
    _assert_accounted(parsed, expected)
    for row in parsed.runs.select("line_no", "job_name", "alloc_gpus", "state").iter_rows():
        line_no, job_name, gpus, state = row
        want = expected[line_no]
        if want.kind != "run":
            continue  # a garbage line that happens to read as a run: counted, checked above
        assert (job_name, gpus or 0, state) == (want.job_name, want.gpus, want.state), line_no
    for line_no, step_name in parsed.steps.select("line_no", "step_name").iter_rows():
        if expected[line_no].kind == "step":
            assert step_name == expected[line_no].job_name, line_no
    for r in parsed.rejects:
        assert r.source_file == "fuzz.txt"
        assert r.field
        assert r.reason.startswith(("expected", "sanity limit ", "ambiguous"))
        assert "expected" in r.reason or r.reason.startswith("ambiguous")
        if expected[r.line_no].kind in ("run", "step"):
            # a line written as sacct prints it is loaded, unless it is impossible (a sanity
            # limit) or its stray separators could belong to more than one free-text field
            assert r.reason.startswith(("sanity limit ", "ambiguous")), r


@settings(FUZZ, max_examples=30)
@given(dumps(), st.integers(200, 2_000))
def test_streamed_batches_equal_the_whole_dump_parse(case, batch_bytes: int):
    text, _, _ = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzz.txt"
        path.write_text(text, encoding="utf-8")
        whole = parse_sacct(path, source_file="f")
        batches = list(iter_sacct_batches(path, source_file="f", batch_bytes=batch_bytes))
    assert sum(b.lines_read for b in batches) == whole.lines_read
    assert sum(b.blank_lines for b in batches) == whole.blank_lines
    assert [r for b in batches for r in b.rejects] == whole.rejects
    keys = pl.concat([b.base_keys for b in batches])
    if all(b.complete for b in batches) and not keys.is_duplicated().any():
        assert_frame_equal(pl.concat([b.runs for b in batches]), whole.runs)
        assert_frame_equal(pl.concat([b.steps for b in batches]), whole.steps)


_ANY_TEXT = st.text(_TEXT | st.sampled_from(["|", "\x1f", "\n", "\r"]), max_size=200)


@settings(FUZZ, max_examples=120)
@given(st.one_of(
    _ANY_TEXT,
    st.binary(max_size=200),
    # a header that reads, then anything: every line after it must be accounted for
    st.tuples(st.sampled_from(["|", "\x1f"]), st.permutations(REQUIRED), _ANY_TEXT).map(
        lambda t: t[0].join(t[1]) + "\n" + t[2]),
    st.tuples(st.permutations(REQUIRED), st.binary(max_size=200)).map(
        lambda t: "|".join(t[0]).encode() + b"\n" + t[1]),
))
def test_any_input_is_parsed_or_refused_for_its_header(data: str | bytes):
    try:
        parsed = parse_sacct(data, source_file="junk")
    except (SacctFormatError, SourceError) as exc:
        message = str(exc)
    else:
        parsed.check_counts()
        return
    assert message.startswith(("junk: expected", "expected")), message


def _ledger() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    ensure_schema(con)
    return con


LEDGER_TABLES = ("slurm_runs", "slurm_steps", "slurm_node_allocations", "rejects",
                 "sacct_loads")


def _tables(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple]]:
    return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in LEDGER_TABLES}


@settings(FUZZ, max_examples=10)
@given(dumps(), dumps(), st.booleans())
def test_the_streamed_load_equals_the_whole_dump_load(first, second, as_of: bool):
    """Into an empty ledger (appends) and then into one with rows (staged, merged), with and
    without ``--as-of`` (runs still going held back, the observation known at the end)."""
    observed = AS_OF if as_of else None
    now = AS_OF + timedelta(days=30)  # the time of the import, when no --as-of is given
    what = "the dump's --as-of time" if as_of else "the time of the import (no --as-of given)"
    with tempfile.TemporaryDirectory() as folder, \
            mock.patch.object(stream_module, "STREAM_BATCH_BYTES", 500), \
            mock.patch.object(slurm_ingest, "_now", return_value=now):
        paths = []
        for i, (text, _, _) in enumerate((first, second)):
            paths.append(Path(folder) / f"dump{i}.txt")
            paths[-1].write_text(text, encoding="utf-8")
        streamed, whole = _ledger(), _ledger()
        try:
            s_loads, w_loads = [], []
            for path in paths:  # the second lands on a ledger with rows: the merge
                s_loads.append(slurm_ingest.import_sacct_file(streamed, path,
                                                              observed_until=observed))
                limits = slurm_ingest.sanity_limits(whole, observed_at=observed or now,
                                                    observed_what=what, charged_until=observed)
                parsed = parse_sacct(path, source_file=str(path), limits=limits)
                w_loads.append(slurm_ingest.store_sacct(whole, parsed, source_file=str(path),
                                                        observed_until=observed,
                                                        partition_key=str(path)))
            assert s_loads == w_loads
            assert _tables(streamed) == _tables(whole)
        finally:
            streamed.close()
            whole.close()
