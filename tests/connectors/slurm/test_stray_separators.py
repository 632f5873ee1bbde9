"""``|`` inside free-text fields under plain ``--parsable2``: recovered only without doubt."""

from __future__ import annotations

import pytest

from connectors.slurm.fields import SACCT_FIELDS
from connectors.slurm.parse import SacctParse, parse_sacct
from tests.connectors.slurm.dumps import CLASSIC_FIELDS, alloc, dump, step


def parse(text: str) -> SacctParse:
    r = parse_sacct(text, source_file="p.txt")
    r.check_counts()
    return r


@pytest.mark.parametrize("fields", [CLASSIC_FIELDS, SACCT_FIELDS], ids=["classic", "contract"])
@pytest.mark.parametrize("name", ["train|resnet50", "a|b|c", "|lead", "trail|", "||"])
def test_pipe_in_job_name_is_recovered(fields: tuple[str, ...], name: str):
    a = alloc(JobName=name)
    r = parse(dump([a, step(a, "batch"), alloc(JobID="101", JobIDRaw="101")], fields, sep="|"))
    assert r.rejects == [], [x.describe() for x in r.rejects]
    assert r.runs["job_name"].to_list() == [name, "train"]
    assert r.runs["alloc_gpus"].to_list() == [1, 1]
    assert r.steps.height == 1


def test_pipe_next_to_bridge_json_is_recovered():
    a = alloc(JobName="serve|v2", AdminComment='{"pods":["ns/p|q"]}')
    r = parse(dump([a], CLASSIC_FIELDS, sep="|"))
    assert r.rejects == []
    row = r.runs.row(0, named=True)
    assert (row["job_name"], row["bridge_pods"]) == ("serve|v2", ["ns/p|q"])


def test_single_free_text_field_takes_the_separators_without_doubt():
    fields = ("JobID", "JobIDRaw", "Cluster", "State", "Submit", "Start", "End", "NodeList",
              "AllocTRES", "JobName")
    r = parse(dump([alloc(JobName="x|COMPLETED|y")], fields, sep="|"))
    assert r.runs["job_name"].to_list() == ["x|COMPLETED|y"]


def test_single_free_text_field_then_ordinary_validation():
    # the extra separators are JobName's, but the line is broken elsewhere: an ordinary reject
    fields = ("JobID", "JobIDRaw", "JobName", "Cluster", "State", "Submit", "Start", "End",
              "NodeList", "AllocTRES")
    r = parse(dump([alloc(JobName="a|b", State="done")], fields, sep="|"))
    assert [(x.field, x.line_no) for x in r.rejects] == [("State", 2)]


@pytest.mark.parametrize(("other", "label"), [("Comment", "Comment"), ("WorkDir", "WorkDir")])
def test_ambiguous_placement_is_rejected(other: str, label: str):
    fields = (*SACCT_FIELDS[:-2], "JobName", other)
    row = {**alloc(JobName="a|b"), other: "c"}
    r = parse(dump([row, alloc(JobID="7", JobIDRaw="7")], fields, sep="|"))
    assert len(r.rejects) == 1
    rej = r.rejects[0]
    assert (rej.line_no, rej.field) == (2, "line")
    assert rej.reason == (
        f"ambiguous: 1 extra separator(s) could belong to JobName or {label} "
        "(2 placements give valid fields)"
    )
    assert rej.raw.count("|") == len(fields)
    assert r.runs["job_id"].to_list() == ["7"]  # columns were not shifted silently


def test_no_valid_placement_is_rejected():
    # classic order: a '|' in the State text cannot be anybody's
    row = alloc(State="COMPLETED|X")
    r = parse(dump([row], CLASSIC_FIELDS, sep="|"))
    rej = r.rejects[0]
    assert rej.field == "line"
    assert rej.reason.startswith("expected 29 fields; 1 extra separator(s) fit no placement in "
                                 "JobName or WCKey or AdminComment")


def test_extra_separators_without_free_text_field():
    fields = ("JobID", "JobIDRaw", "Cluster", "State", "Submit", "Start", "End", "NodeList",
              "AllocTRES")
    text = dump([alloc(Cluster="gpu|lab")], fields, sep="|")
    rej = parse(text).rejects[0]
    assert "no free-text field" in rej.reason
    assert rej.field == "line"


def test_unit_separator_dump_never_needs_placement():
    a = alloc(JobName="train|resnet50", AdminComment="x|y")
    r = parse(dump([a]))
    assert r.runs.row(0, named=True)["job_name"] == "train|resnet50"


def test_no_placement_because_free_text_is_implausible():
    # contract order ends with WCKey|JobName|AdminComment; the extra '|' sits in AdminComment,
    # which must be empty, JSON or a JS1 blob, and a WCKey cannot hold '|' either
    row = alloc(JobName="n", AdminComment="free|text")
    r = parse(dump([row], SACCT_FIELDS, sep="|"))
    assert r.runs.height == 0  # "n|free" + AdminComment "text" is no JSON: no valid placement
    assert "implausible text" in r.rejects[0].reason
    row = alloc(JobName="n", WCKey="w", AdminComment="x|y")
    rej = parse(dump([row], ("JobID", "JobIDRaw", "Cluster", "State", "Submit", "Start", "End",
                             "NodeList", "AllocTRES", "WCKey", "AdminComment"), sep="|")).rejects
    assert len(rej) == 1
    assert "fit no placement in WCKey or AdminComment" in rej[0].reason
    assert "implausible text" in rej[0].reason
