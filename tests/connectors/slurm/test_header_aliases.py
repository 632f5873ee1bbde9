"""One sacct field under two header names (NNodes/AllocNodes, NCPUS/AllocCPUS, a field listed
twice), and stray separators in the many free-text fields of a ``--format=ALL`` dump."""

from __future__ import annotations

import pytest

from connectors.slurm import shapes
from connectors.slurm.fields import SACCT_FIELDS
from connectors.slurm.header import SacctFormatError
from connectors.slurm.parse import SacctParse, parse_sacct
from tests.connectors.slurm.dumps import (
    FORMAT_ALL_FIELDS,
    US,
    alloc,
    alloc_all,
    dump,
    line,
    step,
)


def parse(text: str, **kw: object) -> SacctParse:
    r = parse_sacct(text, source_file="a.txt", **kw)
    r.check_counts()
    return r


def _with(fields: tuple[str, ...], *extra: str) -> tuple[str, ...]:
    return (*fields, *extra)


# ------------------------------------------------------------------------- the names sacct prints


def test_nnodes_and_ncpus_alone_are_allocnodes_and_alloccpus():
    fields = tuple("NNodes" if f == "AllocNodes" else "NCPUS" if f == "AllocCPUS" else f
                   for f in SACCT_FIELDS)
    r = parse(dump([alloc(NNodes="2", NCPUS="8", NodeList="a100-[01-02]")], fields))
    assert r.rejects == []
    assert r.runs.select("alloc_nodes", "alloc_cpus").row(0) == (2, 8)


def test_header_names_are_matched_whatever_their_case():
    names = [f.lower() if f in {"AllocNodes", "JobID", "Start"} else f for f in SACCT_FIELDS]
    text = dump([alloc(AllocNodes="1")])
    r = parse(US.join(names) + text[text.index("\n"):])
    assert r.rejects == []
    assert r.runs.select("job_id", "alloc_nodes").row(0) == ("100", 1)


def test_both_names_load_when_they_agree():
    fields = _with(SACCT_FIELDS, "NNodes", "NCPUS")
    rows = [alloc(NNodes="1", NCPUS="2"),
            alloc(JobID="101", JobIDRaw="101", AllocNodes="2", NNodes="2", NodeList="a100-[01-02]",
                  AllocCPUS="4", NCPUS="4")]
    r = parse(dump(rows, fields))
    assert r.rejects == []
    assert r.runs.select("alloc_nodes", "alloc_cpus").rows() == [(1, 2), (2, 4)]


def test_only_the_row_whose_names_disagree_is_rejected_with_the_reason():
    fields = _with(SACCT_FIELDS, "NNodes", "NCPUS")
    good = alloc(NNodes="1", NCPUS="2")
    bad_cpus = alloc(JobID="101", JobIDRaw="101", NNodes="1", NCPUS="3")
    bad_nodes = alloc(JobID="102", JobIDRaw="102", NNodes="4", NCPUS="2")
    r = parse(dump([good, bad_cpus, step(bad_cpus, "batch", NNodes="1", NCPUS="2"), bad_nodes],
                   fields))
    assert r.runs["job_id"].to_list() == ["100"]
    by_line = {x.line_no: x for x in r.rejects}
    assert sorted(by_line) == [3, 5]
    cpus = by_line[3]
    assert (cpus.source_file, cpus.field) == ("a.txt", "NCPUS")
    assert cpus.reason == ("expected NCPUS to equal AllocCPUS (one sacct field under two names), "
                           "found NCPUS '3' and AllocCPUS '2'")
    assert cpus.raw == line(bad_cpus, fields)
    nodes = by_line[5]
    assert nodes.field == "NNodes"
    assert nodes.reason.startswith("expected NNodes to equal AllocNodes")
    assert nodes.reason.endswith("found NNodes '4' and AllocNodes '1'")
    # the step of the rejected run loads, without a run (no guessing)
    assert r.steps.select("step_job_id", "run_key").rows() == [("101.batch", None)]


def test_nnodes_of_a_job_without_nodes_is_the_requested_node_count():
    """sacct prints NNodes from the TRES node= count when AllocNodes is 0 (print.c PRINT_NNODES;
    the real 20.11 --format=ALL capture of pending jobs shows AllocNodes 0, NNodes 1)."""
    fields = _with(SACCT_FIELDS, "NNodes")
    pending = alloc(State="PENDING", Start="Unknown", End="Unknown", ElapsedRaw="0",
                    AllocNodes="0", AllocTRES="", NodeList="None assigned",
                    ReqTRES="billing=2,cpu=2,mem=2000M,node=2", NNodes="2")
    wrong = {**pending, "JobID": "101", "JobIDRaw": "101", "NNodes": "3"}
    r = parse(dump([pending, wrong], fields))
    assert r.runs.select("job_id", "alloc_nodes").rows() == [("100", 0)]
    [rej] = r.rejects
    assert (rej.line_no, rej.field) == (3, "NNodes")
    assert rej.reason.endswith("found NNodes '3' and AllocNodes '0'")


def test_the_canonical_name_is_read_wherever_it_stands():
    fields = ("NNodes", *SACCT_FIELDS)  # the alias first, AllocNodes later
    r = parse(dump([alloc(NNodes="1"), alloc(JobID="101", JobIDRaw="101", NNodes="2")], fields))
    assert r.runs.select("job_id", "alloc_nodes").rows() == [("100", 1)]
    assert [(x.line_no, x.field) for x in r.rejects] == [(3, "NNodes")]


def test_a_field_listed_twice_is_one_field():
    fields = ("JobID", *SACCT_FIELDS)
    ok, other = alloc(), alloc(JobID="101", JobIDRaw="101")
    r = parse(dump([ok, US.join(["999", *line(other).split(US)])], fields))
    assert r.runs["job_id"].to_list() == ["100"]
    [rej] = r.rejects
    assert (rej.line_no, rej.field) == (3, "JobID")
    assert rej.reason == ("expected JobID to equal JobID (one sacct field under two names), "
                          "found JobID '101' and JobID '999'")


def test_a_name_listed_twice_still_needs_the_other_fields():
    with pytest.raises(SacctFormatError, match=r"expected State, Submit, Start, End, NodeList, "
                       r"AllocTRES, Cluster in the header"):
        parse_sacct("JobID|JobID\n1|1\n", source_file="x.txt")


# --------------------------------------------------------------------------- --format=ALL, -P


def test_format_all_dump_with_both_names_loads():
    rows = [alloc_all(), step(alloc_all(), "batch"), alloc_all(JobID="101", JobIDRaw="101")]
    r = parse(dump(rows, FORMAT_ALL_FIELDS, sep="|"))
    assert r.rejects == []
    assert (r.runs.height, r.steps.height) == (2, 1)
    assert r.runs.select("alloc_nodes", "alloc_cpus", "alloc_gpus").unique().rows() == [(1, 2, 1)]


@pytest.mark.parametrize(("where", "value"), [
    ("JobName", "train|resnet50"),
    ("SubmitLine", "sbatch --wrap 'python x.py | tee log'"),
    ("WorkDir", "/home/alice/a|b"),
    ("SystemComment", "node|rebooted"),
    ("Container", "/images/a|b.sif"),
])
def test_a_stray_separator_in_any_free_text_field_of_format_all_is_placed(where: str, value: str):
    a = alloc_all(**{where: value})
    r = parse(dump([a, step(a, "batch")], FORMAT_ALL_FIELDS, sep="|"))
    assert r.rejects == [], [x.describe() for x in r.rejects]
    got = {"JobName": "job_name"}.get(where)
    if got:
        assert r.runs[got].to_list() == [value]
    assert r.runs.select("alloc_gpus", "user", "state").row(0) == (1, "alice", "COMPLETED")


def test_the_real_shape_of_the_pipe_job_needs_the_fields_nobody_reads(monkeypatch):
    """`sbatch -J 'train|resnet50'` puts a `|` in JobName *and* in SubmitLine (as in the real
    22.05 capture). SubmitLine and SystemComment have only Suspended between them: without its
    shape both placements pass every field the ledger reads."""
    a = alloc_all(JobName="train|resnet50",
                  SubmitLine="sbatch -A physics -J train|resnet50 /jobs/sleep.sh 3")
    text = dump([a], FORMAT_ALL_FIELDS, sep="|")
    r = parse(text)
    assert r.rejects == []
    assert r.runs["job_name"].to_list() == ["train|resnet50"]
    monkeypatch.setattr(shapes, "SHAPES", {})
    r = parse(text)
    assert r.runs.height == 0
    [rej] = r.rejects
    assert rej.reason.startswith("ambiguous: 2 extra separator(s) could belong to SubmitLine or "
                                 "SystemComment")


def test_adjacent_free_text_fields_that_cannot_be_told_apart_are_rejected_not_shifted():
    """Comment and Constraints are neighbours in --format=ALL: `-C "a100|h100"` fits both."""
    a = alloc_all(Constraints="a100|h100")
    r = parse(dump([a, alloc_all(JobID="101", JobIDRaw="101")], FORMAT_ALL_FIELDS, sep="|"))
    assert r.runs["job_id"].to_list() == ["101"]
    [rej] = r.rejects
    assert (rej.line_no, rej.field) == (2, "line")
    assert rej.reason.startswith("ambiguous: 1 extra separator(s) could belong to Comment or "
                                 "Constraints")


def test_a_stray_separator_and_disagreeing_names_reject_the_line():
    a = alloc_all(JobName="a|b", NNodes="7")
    r = parse(dump([a], FORMAT_ALL_FIELDS, sep="|"))
    assert r.runs.height == 0
    [rej] = r.rejects
    assert rej.reason.startswith("expected 109 fields; 1 extra separator(s) fit no placement")
    # the first placement (the separator in AdminComment) shifts NCPUS; the right one (JobName)
    # leaves NNodes '7' against AllocNodes '1'
    assert "found NCPUS '' and AllocCPUS '2'" in rej.reason
