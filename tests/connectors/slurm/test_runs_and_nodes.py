"""Run keys (requeues), step → run association, hostlists and per-node allocations."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest

from connectors.slurm.hostlist import HostlistError, expand_hostlist
from connectors.slurm.parse import allocations_per_node, parse_sacct
from connectors.slurm.records import NODE_ALLOCATIONS_SCHEMA
from tests.connectors.slurm.dumps import T0, alloc, dump, step


def parse(rows, **kw):
    r = parse_sacct(dump(rows), source_file="r.txt", **kw)
    r.check_counts()
    assert r.rejects == [], [x.describe() for x in r.rejects]
    return r


def requeued(first_submit: int, second_submit: int):
    run1 = alloc(JobID="20", JobIDRaw="20", State="REQUEUED", Submit=str(first_submit),
                 Start=str(first_submit + 1), End=str(first_submit + 6), ElapsedRaw="5")
    run2 = alloc(JobID="20", JobIDRaw="20", Submit=str(second_submit),
                 Start=str(second_submit + 2), End=str(second_submit + 5), ElapsedRaw="3")
    return run1, run2


def test_requeued_runs_get_their_own_keys_and_steps():
    run1, run2 = requeued(T0, T0 + 10)
    rows = [run1, step(run1, "batch", State="CANCELLED", ExitCode="0:15"), step(run1, "extern"),
            run2, step(run2, "batch"), step(run2, "extern", ExitCode="")]
    r = parse(rows)
    assert r.runs["run_key"].to_list() == [f"gpulab:20:{T0}", f"gpulab:20:{T0 + 10}"]
    assert r.steps["run_key"].to_list() == [f"gpulab:20:{T0}"] * 2 + [f"gpulab:20:{T0 + 10}"] * 2


def test_run_key_is_stable_across_overlapping_windows():
    run1, run2 = requeued(T0, T0 + 10)
    later = parse([run2])  # a window that only sees the second run
    both = parse([run1, run2])
    assert later.runs["run_key"][0] == both.runs["run_key"][1]


def _utc(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC).replace(tzinfo=None)


def test_colliding_keys_are_numbered_by_start_not_by_line_order():
    run1, run2 = requeued(T0, T0)  # requeued within the submit's second
    a = parse([run1, run2]).runs
    b = parse([run2, run1]).runs
    key = f"gpulab:20:{T0}"
    for runs in (a, b):
        got = dict(zip(runs["start"].to_list(), runs["run_key"].to_list(), strict=True))
        assert got == {_utc(T0 + 1): key, _utc(T0 + 2): key + "#2"}


def test_run_key_without_submit():
    r = parse([alloc(Submit="Unknown")])
    assert r.runs["run_key"].to_list() == ["gpulab:100:none"]


def test_steps_of_a_reordered_dump_still_find_their_run():
    a = alloc(JobID="5", JobIDRaw="5")
    b = alloc(JobID="6", JobIDRaw="6")
    rows = [step(a, "batch"), b, step(b, "batch"), a, step(a, "extern")]
    r = parse(rows)
    keys = dict(zip(r.runs["job_id"].to_list(), r.runs["run_key"].to_list(), strict=True))
    assert r.steps.select("job_id", "run_key").rows() == [
        ("5", keys["5"]), ("6", keys["6"]), ("5", keys["5"])]


def test_step_without_its_allocation_has_no_run():
    r = parse([step(alloc(JobID="9", JobIDRaw="9"), "batch")])
    assert r.steps["run_key"].to_list() == [None]


def test_het_and_array_steps_attach_by_raw_id():
    het0 = alloc(JobID="15+0", JobIDRaw="15")
    het1 = alloc(JobID="15+1", JobIDRaw="16", AllocTRES="cpu=2,mem=2000M,node=1")
    task = alloc(JobID="6_5", JobIDRaw="6")
    rows = [het0, step(het0, "batch"), het1, step(het1, "0"), task, step(task, "batch")]
    r = parse(rows)
    got = r.steps.join(r.runs.select("run_key", pl.col("job_id").alias("run_job_id")),
                       on="run_key")
    assert got.select("step_job_id", "run_job_id").rows() == [
        ("15+0.batch", "15+0"), ("15+1.0", "15+1"), ("6_5.batch", "6_5")]


# ---------------------------------------------------------------------------------- hostlists


@pytest.mark.parametrize(("expr", "nodes"), [
    ("gpu-[01-03,07]", ["gpu-01", "gpu-02", "gpu-03", "gpu-07"]),
    ("a100-0[1-2]", ["a100-01", "a100-02"]),
    ("node1,node[3-4]", ["node1", "node3", "node4"]),
    ("n[8-10]", ["n8", "n9", "n10"]),
    ("n[08-10]", ["n08", "n09", "n10"]),
    ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
    ("node[1-2]-ib", ["node1-ib", "node2-ib"]),
    ("cpu-01", ["cpu-01"]),
    ("None assigned", []),
    ("", []),
    (None, []),
])
def test_expand_hostlist(expr: str | None, nodes: list[str]):
    assert expand_hostlist(expr) == nodes


@pytest.mark.parametrize(("expr", "why"), [
    ("gpu-[01-03", "balanced"), ("gpu-01]", "balanced"), ("gpu-[a-b]", "ranges"),
    ("gpu-[3-1]", "ascending"), ("a,,b", "empty"), ("gpu 01", "node names"),
    ("n[[1-2]]", "nested"), ("n[1-99999999]", "at most"),
])
def test_malformed_hostlists(expr: str, why: str):
    with pytest.raises(HostlistError, match=why):
        expand_hostlist(expr)


# ---------------------------------------------------------------------------------- per node


def _runs(*rows):
    return parse(list(rows)).runs


def test_even_split_remainder_to_the_first_nodes():
    runs = _runs(alloc(NodeList="gpu-[01-03]", AllocNodes="3",
                       AllocTRES="cpu=6,gres/gpu:a100=5,gres/gpu=5,node=3"))
    per = allocations_per_node(runs)
    assert dict(per.schema) == NODE_ALLOCATIONS_SCHEMA
    assert per.select("node", "node_index", "gpus", "gpu_model").rows() == [
        ("gpu-01", 0, 2, "a100"), ("gpu-02", 1, 2, "a100"), ("gpu-03", 2, 1, "a100")]
    assert per["gpus"].sum() == 5
    assert (per["start"] == runs["start"][0]).all()
    assert (per["end"] == runs["end"][0]).all()


def test_model_from_node_mapping_when_untyped_or_mixed():
    untyped = alloc(JobID="1", JobIDRaw="1", NodeList="a100-01,h100-01", AllocNodes="2",
                    AllocTRES="cpu=2,gres/gpu=2,node=2")
    mixed = alloc(JobID="2", JobIDRaw="2", NodeList="a100-01,h100-01", AllocNodes="2",
                  AllocTRES="cpu=2,gres/gpu:a100=1,gres/gpu:h100=1,gres/gpu=2,node=2")
    runs = _runs(untyped, mixed)
    mapping = {"a100-01": "a100", "h100-01": "h100"}
    per = allocations_per_node(runs, mapping)
    assert per.select("job_id", "node", "gpus", "gpu_model").rows() == [
        ("1", "a100-01", 1, "a100"), ("1", "h100-01", 1, "h100"),
        ("2", "a100-01", 1, "a100"), ("2", "h100-01", 1, "h100")]
    assert allocations_per_node(runs)["gpu_model"].to_list() == ["", "", "", ""]


def test_cpu_only_and_unstarted_runs():
    cpu = alloc(JobID="1", JobIDRaw="1", NodeList="cpu-01", AllocTRES="cpu=2,mem=2000M,node=1")
    pending = alloc(JobID="2", JobIDRaw="2", NodeList="None assigned", AllocTRES="")
    runs = _runs(cpu, pending)
    assert allocations_per_node(runs).height == 0
    with_cpu = allocations_per_node(runs, include_cpu_only=True)
    assert with_cpu.select("job_id", "node", "gpus").rows() == [("1", "cpu-01", 0)]


def test_steps_of_a_rejected_run_are_not_given_another_run():
    # the second run of requeued job 20 is rejected (bad Start): its steps must not fall back to
    # the first run, which has the same JobIDRaw
    run1, run2 = requeued(T0, T0 + 10)
    rows = [run1, step(run1, "batch"), {**run2, "Start": "soon"}, step(run2, "batch")]
    r = parse_sacct(dump(rows), source_file="r.txt")
    r.check_counts()
    assert [x.line_no for x in r.rejects] == [4]
    assert r.steps["run_key"].to_list() == [f"gpulab:20:{T0}", None]
