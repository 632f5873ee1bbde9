"""Field-by-field rules of the sacct parser: ids, times, durations, TRES, states, exit codes."""

from __future__ import annotations

import gzip
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from connectors.errors import SourceError
from connectors.slurm.parse import SacctFormatError, SacctParse, parse_sacct
from connectors.slurm.records import RUNS_SCHEMA, STEPS_SCHEMA
from tests.connectors.slurm.dumps import CLASSIC_FIELDS, T0, US, alloc, dump, line, step

GIB = 1 << 30
MIB = 1 << 20


def parse(text: str, **kw) -> SacctParse:
    result = parse_sacct(text, source_file="t.txt", **kw)
    result.check_counts()
    return result


def only_run(result: SacctParse) -> dict:
    assert result.rejects == [], [r.describe() for r in result.rejects]
    assert result.runs.height == 1
    return result.runs.row(0, named=True)


def one_reject(result: SacctParse):
    assert len(result.rejects) == 1, [r.describe() for r in result.rejects]
    return result.rejects[0]


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text)


# ---------------------------------------------------------------------------------- schemas


def test_output_schemas_are_explicit():
    r = parse(dump([alloc(), step(alloc(), "batch")]))
    assert dict(r.runs.schema) == RUNS_SCHEMA
    assert dict(r.steps.schema) == STEPS_SCHEMA
    empty = parse(dump([]))
    assert dict(empty.runs.schema) == RUNS_SCHEMA
    assert dict(empty.steps.schema) == STEPS_SCHEMA
    assert empty.lines_read == 0


# ---------------------------------------------------------------------------------- job ids

ID_CASES = [
    # JobID, JobIDRaw, expected run columns
    ("123", "123", {"job_id": "123", "job_id_raw": 123, "array_job_id": None,
                    "array_task_id": None, "het_job_id": None, "het_offset": None}),
    ("6_0", "23", {"job_id": "6_0", "job_id_raw": 23, "array_job_id": 6, "array_task_id": 0}),
    # the last task reuses the array's own id as JobIDRaw
    ("6_5", "6", {"job_id": "6_5", "job_id_raw": 6, "array_job_id": 6, "array_task_id": 5}),
    ("123_[5-9%2]", "123", {"array_job_id": 123, "array_task_id": None,
                            "array_task_range": "5-9%2"}),
    ("123_[1,4-9]", "123", {"array_job_id": 123, "array_task_range": "1,4-9"}),
    ("15+0", "15", {"het_job_id": 15, "het_offset": 0, "job_id_raw": 15, "array_job_id": None}),
    # het component 1 takes the next raw id
    ("15+1", "16", {"het_job_id": 15, "het_offset": 1, "job_id_raw": 16}),
]


@pytest.mark.parametrize(("job_id", "raw", "expected"), ID_CASES)
def test_allocation_ids(job_id: str, raw: str, expected: dict):
    row = only_run(parse(dump([alloc(JobID=job_id, JobIDRaw=raw)])))
    for key, value in expected.items():
        assert row[key] == value, key


STEP_CASES = [
    # JobID, JobIDRaw, parent job_id, parent raw, step_id
    ("123.batch", "123.batch", "123", 123, "batch"),
    ("123.extern", "123.extern", "123", 123, "extern"),
    ("123.interactive", "123.interactive", "123", 123, "interactive"),
    ("123.0", "123.0", "123", 123, "0"),
    ("123.12", "123.12", "123", 123, "12"),
    ("123_4.batch", "130.batch", "123_4", 130, "batch"),
    ("6_5.batch", "6.batch", "6_5", 6, "batch"),
    ("15+1.0", "16.0", "15+1", 16, "0"),
    ("15+0.batch", "15.batch", "15+0", 15, "batch"),
]


@pytest.mark.parametrize(("job_id", "raw", "parent", "parent_raw", "step_id"), STEP_CASES)
def test_step_ids(job_id: str, raw: str, parent: str, parent_raw: int, step_id: str):
    r = parse(dump([alloc(JobID=job_id, JobIDRaw=raw)]))
    assert r.rejects == []
    assert r.runs.height == 0
    row = r.steps.row(0, named=True)
    assert (row["job_id"], row["job_id_raw"], row["step_id"], row["step_job_id"]) == (
        parent, parent_raw, step_id, job_id)


@pytest.mark.parametrize(("job_id", "raw", "field"), [
    ("abc", "abc", "JobID"),
    ("12_x", "12", "JobID"),
    ("12.", "12.", "JobID"),
    ("12", "12.batch", "JobIDRaw"),  # step part only on one side
    ("12.batch", "12.extern", "JobIDRaw"),
    ("12", "", "JobIDRaw"),
])
def test_malformed_ids_are_rejected(job_id: str, raw: str, field: str):
    rej = one_reject(parse(dump([alloc(JobID=job_id, JobIDRaw=raw)])))
    assert rej.field == field
    assert rej.reason.startswith("expected ")
    assert "found" in rej.reason
    assert rej.line_no == 2
    assert rej.source == "sacct"
    assert rej.source_file == "t.txt"


# ---------------------------------------------------------------------------------- times

TIME_CASES = [
    # text, timezone, expected UTC (None = null)
    (str(T0), "UTC", "2026-11-30T05:43:44"),
    (str(T0), "Europe/Berlin", "2026-11-30T05:43:44"),  # epoch ignores the zone
    ("2026-11-30T06:43:44", "Europe/Berlin", "2026-11-30T05:43:44"),  # CET, UTC+1
    ("2026-07-01T12:00:00", "Europe/Berlin", "2026-07-01T10:00:00"),  # CEST, UTC+2
    ("2026-07-01T12:00:00", "America/New_York", "2026-07-01T16:00:00"),
    ("2026-07-01T12:00:00", "UTC", "2026-07-01T12:00:00"),
    ("2026-07-01T12:00:00+0000", "Europe/Berlin", "2026-07-01T12:00:00"),
    ("2026-07-01T12:00:00+01:00", "UTC", "2026-07-01T11:00:00"),
    ("2026-07-01T12:00:00-0530", "UTC", "2026-07-01T17:30:00"),
    ("2026-07-01T12:00:00Z", "Asia/Tokyo", "2026-07-01T12:00:00"),
    ("Unknown", "UTC", None),
    ("None", "UTC", None),
    ("", "UTC", None),
]


@pytest.mark.parametrize(("text", "tz", "expected"), TIME_CASES)
def test_eligible_time_shapes(text: str, tz: str, expected: str | None):
    row = only_run(parse(dump([alloc(Eligible=text)]), timezone=tz))
    assert row["eligible"] == (utc(expected) if expected else None)
    assert row["eligible"] is None or row["eligible"].tzinfo is None


def test_running_job_has_no_end():
    row = only_run(parse(dump([alloc(End="Unknown", State="RUNNING", ElapsedRaw="6")])))
    assert row["end"] is None
    assert row["state"] == "RUNNING"
    assert row["elapsed_s"] == 6


@pytest.mark.parametrize("text", ["2026-13-01T00:00:00", "yesterday", "2026-07-01 12:00:00",
                                  "17960174x", "2026-07-01T12:00"])
def test_malformed_times_are_rejected(text: str):
    rej = one_reject(parse(dump([alloc(Start=text)])))
    assert rej.field == "Start"
    assert rej.reason.startswith("expected epoch seconds")
    assert repr(text) in rej.reason


def _berlin_row(**over: str) -> dict[str, str]:
    base = {"Submit": "2026-10-25T01:00:00", "Eligible": "2026-10-25T01:00:00"}
    return alloc(**{**base, **over})


def test_dst_ambiguous_start_is_resolved_by_elapsed():
    # 02:30 happens twice on 2026-10-25 in Berlin (00:30 UTC, then 01:30 UTC);
    # End 03:10 CET is 02:10 UTC and ElapsedRaw 2400 s → Start was the second 02:30.
    text = dump([_berlin_row(Start="2026-10-25T02:30:00", End="2026-10-25T03:10:00",
                             ElapsedRaw="2400")])
    row = only_run(parse(text, timezone="Europe/Berlin"))
    assert row["start"] == utc("2026-10-25T01:30:00")
    assert row["end"] == utc("2026-10-25T02:10:00")


def test_dst_ambiguous_submit_is_resolved_by_ordering():
    # Start is pinned by End - ElapsedRaw to 01:20 UTC (the second 02:20); Submit 02:50 can then
    # only be the first 02:50 (00:50 UTC) since a job is submitted before it starts.
    text = dump([_berlin_row(Submit="2026-10-25T02:50:00", Eligible="2026-10-25T02:50:00",
                             Start="2026-10-25T02:20:00", End="2026-10-25T03:30:00",
                             ElapsedRaw="4200")])
    row = only_run(parse(text, timezone="Europe/Berlin"))
    assert row["submit"] == utc("2026-10-25T00:50:00")
    assert row["start"] == utc("2026-10-25T01:20:00")


def test_dst_ambiguous_times_that_cannot_be_resolved_are_rejected():
    text = dump([_berlin_row(Start="2026-10-25T02:30:00", End="2026-10-25T02:40:00",
                             ElapsedRaw="600")])
    rej = one_reject(parse(text, timezone="Europe/Berlin"))
    assert rej.field == "Start"
    assert "repeated when DST ends" in rej.reason


def test_local_time_inside_the_dst_gap_is_rejected():
    text = dump([_berlin_row(Start="2026-03-29T02:30:00", End="2026-03-29T04:00:00")])
    rej = one_reject(parse(text, timezone="Europe/Berlin"))
    assert rej.field == "Start"
    assert "exists in Europe/Berlin" in rej.reason
    assert "skipped when DST starts" in rej.reason


def test_unknown_timezone_is_a_clear_error():
    with pytest.raises(ValueError, match="expected an IANA time zone"):
        parse_sacct(dump([alloc()]), timezone="Mars/Olympus", source_file="t.txt")


# ---------------------------------------------------------------------------------- durations

NO_RAW = (*tuple(f for f in CLASSIC_FIELDS if f not in {"ElapsedRaw", "TimelimitRaw"}), "Timelimit")


@pytest.mark.parametrize(("elapsed", "seconds"), [
    ("1-02:03:04", 93_784), ("02:03:04", 7_384), ("00:00:00", 0), ("12:34.567", 754),
    ("45:00", 2_700), ("10-00:00:00", 864_000),
])
def test_elapsed_text_when_no_raw_field(elapsed: str, seconds: int):
    text = dump([alloc(Elapsed=elapsed, Timelimit="01:00:00")], fields=NO_RAW, sep="|")
    row = only_run(parse(text))
    assert row["elapsed_s"] == seconds
    assert row["timelimit_s"] == 3600


@pytest.mark.parametrize(("limit", "seconds"), [
    ("UNLIMITED", None), ("Partition_Limit", None), ("INVALID", None), ("", None),
    ("2-00:00:00", 172_800), ("00:01:00", 60),
])
def test_timelimit_text(limit: str, seconds: int | None):
    row = only_run(parse(dump([alloc(Timelimit=limit)], fields=NO_RAW, sep="|")))
    assert row["timelimit_s"] == seconds


@pytest.mark.parametrize(("raw", "seconds"), [("5", 300), ("1", 60), ("UNLIMITED", None),
                                              ("Partition_Limit", None), ("", None)])
def test_timelimit_raw_is_minutes(raw: str, seconds: int | None):
    assert only_run(parse(dump([alloc(TimelimitRaw=raw)])))["timelimit_s"] == seconds


def test_elapsed_text_is_read_only_without_the_raw_field():
    # with ElapsedRaw present the redundant Elapsed text is not read at all
    assert only_run(parse(dump([alloc(Elapsed="ages")])))["elapsed_s"] == 60
    rej = one_reject(parse(dump([alloc(Elapsed="ages")], fields=NO_RAW, sep="|")))
    assert rej.field == "Elapsed"
    assert rej.reason.startswith("expected [D-]HH:MM:SS")


def test_raw_fields_are_preferred_over_text():
    row = only_run(parse(dump([alloc(Elapsed="00:00:59", ElapsedRaw="61")])))
    assert row["elapsed_s"] == 61


@pytest.mark.parametrize(("over", "field"), [
    ({"ElapsedRaw": "1.5"}, "ElapsedRaw"),
    ({"ElapsedRaw": "-3"}, "ElapsedRaw"), ({"TimelimitRaw": "soon"}, "TimelimitRaw"),
    ({"AllocCPUS": "two"}, "AllocCPUS"), ({"UID": "alice"}, "UID"),
    ({"AllocNodes": "x"}, "AllocNodes"),
])
def test_malformed_numbers_are_rejected(over: dict[str, str], field: str):
    rej = one_reject(parse(dump([alloc(**over)])))
    assert rej.field == field
    assert "found" in rej.reason


# ---------------------------------------------------------------------------------- TRES

TRES_CASES = [
    # AllocTRES, gpus, types, mem bytes
    ("billing=16,cpu=4,gres/gpu:a100=1,gres/gpu=1,mem=8G,node=1", 1, [("a100", 1)], 8 * GIB),
    ("gres/gpu=2,gres/gpu:a100=2,cpu=8,mem=32768M", 2, [("a100", 2)], 32768 * MIB),
    ("billing=162,cpu=32,gres/gpu:a100=8,gres/gpu=8,mem=204800M,node=1", 8, [("a100", 8)],
     204800 * MIB),
    # two models under one untyped total: the total is NOT the sum of both
    ("cpu=8,gres/gpu:a100=2,gres/gpu:h100=2,gres/gpu=4,mem=1T", 4,
     [("a100", 2), ("h100", 2)], 1 << 40),
    # only typed keys (no untyped one in the DB): sum them
    ("cpu=2,gres/gpu:a100=2,gres/gpu:h100=1,mem=1.5G", 3, [("a100", 2), ("h100", 1)],
     int(1.5 * GIB)),
    ("cpu=2,gres/gpu=2,mem=2000", 2, [], 2000 * MIB),  # untyped only; bare mem is MB
    # gpumem / gpuutil are not GPUs
    ("cpu=2,gres/gpumem=40G,gres/gpuutil=50,gres/gpu=1,mem=512K", 1, [], 512 * 1024),
    ("cpu=2,gres/gpumem=81920M,gres/gpu:a100=1", 1, [("a100", 1)], None),
    ("cpu=2,gres/gpu:a100_3g.20gb=2,gres/gpu=2", 2, [("a100_3g.20gb", 2)], None),
    ("cpu=2,gres/shard=4,mem=2000M", 0, [], 2000 * MIB),
    ("billing=2,cpu=2,mem=2000M,node=1", 0, [], 2000 * MIB),
    ("", 0, [], None),
]


@pytest.mark.parametrize(("tres", "gpus", "types", "mem"), TRES_CASES)
def test_alloc_tres(tres: str, gpus: int, types: list[tuple[str, int]], mem: int | None):
    row = only_run(parse(dump([alloc(AllocTRES=tres)])))
    assert row["alloc_gpus"] == gpus
    assert sorted((t["model"], t["gpus"]) for t in row["alloc_gpu_types"]) == types
    assert row["alloc_mem_bytes"] == mem
    assert row["alloc_tres"] == tres  # the raw string is kept


def test_req_tres_untyped_request():
    row = only_run(parse(dump([alloc(ReqTRES="billing=29,cpu=1,gres/gpu=2,mem=32768M,node=1")])))
    assert (row["req_gpus"], row["req_mem_bytes"]) == (2, 32768 * MIB)


@pytest.mark.parametrize(("field", "tres"), [
    ("AllocTRES", "cpu=2,gres/gpu=x"), ("AllocTRES", "cpu"), ("AllocTRES", "cpu=2,,mem=1G"),
    ("AllocTRES", "cpu=2;gres/gpu=1"), ("ReqTRES", "gres/gpu=1,mem=8Q"),
])
def test_malformed_tres_is_rejected(field: str, tres: str):
    rej = one_reject(parse(dump([alloc(**{field: tres})])))
    assert rej.field == field
    assert rej.reason.startswith("expected name=count")


# ---------------------------------------------------------------------------------- states

@pytest.mark.parametrize(("text", "state", "uid"), [
    ("CANCELLED by 1001", "CANCELLED", 1001), ("CANCELLED by 0", "CANCELLED", 0),
    ("COMPLETED", "COMPLETED", None), ("OUT_OF_MEMORY", "OUT_OF_MEMORY", None),
    ("NODE_FAIL", "NODE_FAIL", None), ("REQUEUED", "REQUEUED", None),
    ("SOME_FUTURE_STATE", "SOME_FUTURE_STATE", None),
])
def test_states(text: str, state: str, uid: int | None):
    row = only_run(parse(dump([alloc(State=text)])))
    assert (row["state"], row["cancelled_by_uid"]) == (state, uid)


@pytest.mark.parametrize("text", ["completed", "CANCELLED by alice", "", "CANCELLED+"])
def test_malformed_states_are_rejected(text: str):
    assert one_reject(parse(dump([alloc(State=text)]))).field == "State"


@pytest.mark.parametrize(("exit_code", "derived", "expected"), [
    ("0:0", "0:0", (0, 0, 0, 0)), ("1:0", "0:0", (1, 0, 0, 0)), ("0:9", "0:0", (0, 9, 0, 0)),
    ("0:0", "3:0", (0, 0, 3, 0)), ("0:15", "", (0, 15, None, None)),
    ("", "", (None, None, None, None)),
])
def test_exit_codes(exit_code: str, derived: str, expected: tuple):
    row = only_run(parse(dump([alloc(ExitCode=exit_code, DerivedExitCode=derived)])))
    got = (row["exit_code"], row["exit_signal"], row["derived_exit_code"],
           row["derived_exit_signal"])
    assert got == expected


@pytest.mark.parametrize(("field", "text"), [("ExitCode", "1"), ("DerivedExitCode", "a:b")])
def test_malformed_exit_codes_are_rejected(field: str, text: str):
    assert one_reject(parse(dump([alloc(**{field: text})]))).field == field


# ---------------------------------------------------------------------------------- hostlists


@pytest.mark.parametrize(("nodelist", "nodes"), [
    ("gpu-[01-03,07]", ["gpu-01", "gpu-02", "gpu-03", "gpu-07"]),
    ("a100-0[1-2]", ["a100-01", "a100-02"]),
    ("node1,node[3-4]", ["node1", "node3", "node4"]),
    ("None assigned", []),
])
def test_nodelist_is_expanded(nodelist: str, nodes: list[str]):
    assert only_run(parse(dump([alloc(NodeList=nodelist)])))["nodes"] == nodes


def test_malformed_nodelist_is_rejected():
    rej = one_reject(parse(dump([alloc(NodeList="gpu-[01-03")])))
    assert rej.field == "NodeList"
    assert "balanced brackets" in rej.reason


# ---------------------------------------------------------------------------------- free text


@pytest.mark.parametrize(("comment", "pods"), [
    ('{"pods":["team-a/trainer-0"]}', ["team-a/trainer-0"]),
    ('{"pods":["ns/a","ns/b"]}', ["ns/a", "ns/b"]),
    ('{"pods": "not-a-list"}', []),
    ('{"pods":["ns/a"]', []),  # invalid JSON: free text, no reject
    ("JS1:H4sIAAAAAAAAA6tWSs7P", []),
    ("", []),
])
def test_bridge_pods_from_admin_comment(comment: str, pods: list[str]):
    row = only_run(parse(dump([alloc(AdminComment=comment)])))
    assert row["bridge_pods"] == pods
    assert row["admin_comment"] == comment


@pytest.mark.parametrize("name", ["モデル学習-ü-🚀", "eval, `v2` run", "a b\tc", "x=1,y=2"])
def test_names_survive(name: str):
    assert only_run(parse(dump([alloc(JobName=name)])))["job_name"] == name


# ---------------------------------------------------------------------------------- lines


def test_fewer_fields_are_rejected_and_good_lines_still_load():
    rows = [alloc(), US.join(["101", "101", "alice"]), alloc(JobID="102", JobIDRaw="102")]
    r = parse(dump(rows))
    rej = one_reject(r)
    assert (rej.line_no, rej.field) == (3, "line")
    assert rej.reason == "expected 29 fields separated by '\\x1f', found 3"
    assert rej.raw == US.join(["101", "101", "alice"])
    assert r.runs["job_id"].to_list() == ["100", "102"]


def test_blank_lines_are_counted():
    text = dump([alloc()]) + "\n\n" + line(alloc(JobID="7", JobIDRaw="7")) + "\n"
    r = parse(text)
    assert (r.lines_read, r.blank_lines, r.runs.height) == (4, 2, 2)
    assert r.runs["line_no"].to_list() == [2, 5]


def test_carriage_returns_are_line_endings():
    text = dump([alloc()]).replace("\n", "\r\n")
    assert only_run(parse(text))["job_name"] == "train"


def test_invalid_utf8_line_is_rejected():
    data = dump([alloc(), alloc(JobID="7", JobIDRaw="7")]).encode()
    data = data.replace(b"\x1ftrain\x1f", b"\x1ftr\xffain\x1f", 1)
    r = parse_sacct(data, source_file="t.txt")
    r.check_counts()
    rej = one_reject(r)
    assert (rej.line_no, rej.field) == (2, "line")
    assert "UTF-8" in rej.reason
    assert r.runs["job_id"].to_list() == ["7"]


def test_every_reject_names_file_line_field_reason_and_raw():
    rows = [alloc(), alloc(JobID="x", JobIDRaw="x"), alloc(AllocTRES="gres/gpu=1,cpu"),
            alloc(Start="later")]
    r = parse(dump(rows))
    assert [(x.line_no, x.field) for x in r.rejects] == [(3, "JobID"), (4, "AllocTRES"),
                                                         (5, "Start")]
    for x in r.rejects:
        assert x.source_file == "t.txt"
        assert x.raw.startswith(("x", "100"))
        assert x.describe().startswith(f"t.txt:{x.line_no}: field {x.field}: expected")
    assert r.runs.height == 1


# ---------------------------------------------------------------------------------- header


def test_any_field_order_and_extra_fields():
    fields = ("Cluster", "WorkDir", "End", "Start", "Submit", "State", "AllocTRES", "NodeList",
              "JobIDRaw", "JobID", "Priority")
    row = {**alloc(), "WorkDir": "/home/alice", "Priority": "4294901759"}
    r = parse(dump([row], fields=fields, sep="|"))
    got = only_run(r)
    assert (got["job_id"], got["alloc_gpus"], got["user"]) == ("100", 1, None)
    assert r.delimiter == "|"


def test_missing_required_fields_is_a_clear_error():
    fields = ("JobID", "JobIDRaw", "State", "Start", "End")
    with pytest.raises(SacctFormatError) as exc:
        parse_sacct(dump([alloc()], fields=fields, sep="|"), source_file="dump.txt")
    msg = str(exc.value)
    assert msg.startswith("dump.txt: expected Submit, NodeList, AllocTRES, Cluster in the "
                          "header (GPU-seconds need JobID, State, Submit, Start, End, NodeList, "
                          "AllocTRES and Cluster), found none")
    assert "the header is JobID, JobIDRaw, State, Start, End" in msg
    assert "--cluster NAME" in msg


def test_headerless_dump_is_a_clear_error():
    text = line(alloc()) + "\n"
    with pytest.raises(SacctFormatError, match="is the header missing"):
        parse_sacct(text, source_file="x.txt")


@pytest.mark.parametrize("text", ["", "JobID JobIDRaw State\n"])
def test_no_header_or_no_delimiter(text: str):
    with pytest.raises(SacctFormatError, match="expected a header"):
        parse_sacct(text, source_file="x.txt")


@pytest.mark.parametrize("sep", ["^|^", ";", "\t"])
def test_given_delimiter(sep: str):
    r = parse(dump([alloc(JobName="a|b")], sep=sep), delimiter=sep)
    assert only_run(r)["job_name"] == "a|b"
    assert r.delimiter == sep


def test_reads_files_and_gzip(tmp_path: Path):
    text = dump([alloc(), step(alloc(), "batch")])
    plain = tmp_path / "d.txt"
    plain.write_text(text, encoding="utf-8")
    gz = tmp_path / "d.txt.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    a = parse_sacct(plain, source_file="d.txt")
    b = parse_sacct(gz, source_file="d.txt")
    assert a.runs.equals(b.runs)
    assert a.steps.equals(b.steps)
    with pytest.raises(SourceError, match="expected a sacct dump"):
        parse_sacct(tmp_path / "missing.txt", source_file="missing.txt")


def test_lines_are_traceable():
    r = parse(dump([alloc(), step(alloc(), "batch")]))
    assert r.runs["source_file"].to_list() == ["t.txt"]
    assert (r.runs["line_no"].to_list(), r.steps["line_no"].to_list()) == ([2], [3])


def test_big_dump_goes_through_batches(monkeypatch: pytest.MonkeyPatch):
    import connectors.slurm.parse as parse_module

    monkeypatch.setattr(parse_module, "BATCH_BYTES", 1000)
    rows = []
    for j in range(40):
        a = alloc(JobID=str(1000 + j), JobIDRaw=str(1000 + j))
        rows += [a, step(a, "batch"), step(a, "extern")]
    rows.insert(50, "broken")
    r = parse(dump(rows))
    assert (r.runs.height, r.steps.height, len(r.rejects)) == (40, 80, 1)
    assert r.runs["line_no"].is_sorted()
    assert r.steps["line_no"].is_sorted()
    # each step found its own run across batch borders
    joined = r.steps.join(r.runs.select("run_key", pl.col("job_id").alias("run_job")),
                          on="run_key")
    assert joined.height == 80
    assert (joined["job_id"] == joined["run_job"]).all()


def test_synthetic_dump_same_result_in_one_batch_or_many(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path):
    import connectors.slurm.parse as parse_module
    from tests.connectors.slurm.synthetic import write_dump

    path = write_dump(tmp_path / "synthetic.txt", 20_000)
    whole = parse_sacct(path, source_file="s")
    monkeypatch.setattr(parse_module, "BATCH_BYTES", 200_000)
    many = parse_sacct(path, source_file="s")
    for r in (whole, many):
        r.check_counts()
        assert r.rejects == []
    assert whole.runs.equals(many.runs)
    assert whole.steps.equals(many.steps)
    assert whole.steps["run_key"].null_count() == 0
    assert whole.runs["bridge_pods"].list.len().sum() > 0
