"""Allocation lines that parse but cannot be real are rejected with the rule they broke (#13).

connectors.slurm.sanity: GPUs per job (a ceiling) and per node (the inventory, else a ceiling),
End before Start, absurd durations, times after the dump's observation time.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.errors import Reject
from connectors.slurm.parse import iter_sacct_batches, parse_sacct
from connectors.slurm.sanity import (
    DEFAULT_LIMITS,
    RULES,
    SanityLimits,
    counts_by_rule,
    rule_of,
)
from tests.connectors.slurm.dumps import T0, alloc, dump, step

UTC0 = datetime(1970, 1, 1)
SEEN = UTC0 + timedelta(seconds=T0 + 3600)  # an hour after T0: every default time is before


def _parse(rows, limits: SanityLimits = DEFAULT_LIMITS, **kw):
    parsed = parse_sacct(dump(rows, **kw), source_file="d.txt", limits=limits)
    parsed.check_counts()
    return parsed


def _only_reject(parsed) -> Reject:
    assert len(parsed.rejects) == 1, parsed.rejects
    return parsed.rejects[0]


def test_a_job_with_more_gpus_than_any_job_is_rejected_with_the_ceiling():
    bad = alloc(JobID="7", JobIDRaw="7", AllocTRES="cpu=2,gres/gpu=99999999999,node=1")
    parsed = _parse([alloc(), bad, step(bad, "batch")])
    r = _only_reject(parsed)
    assert (r.line_no, r.field) == (3, "AllocTRES")
    assert r.reason == ("sanity limit gpus_per_job: expected at most 100,000 GPUs per job "
                        "(max_gpus_per_job), found 99,999,999,999 GPUs in AllocTRES")
    assert "gres/gpu=99999999999" in r.raw  # the line as it was
    assert rule_of(r) == "gpus_per_job"
    assert parsed.runs["job_id"].to_list() == ["100"]
    # its step stays a step, with no run (the allocation line was rejected: no guessing)
    assert parsed.steps.filter(pl.col("job_id") == "7")["run_key"].to_list() == [None]


def test_gpus_per_node_are_held_to_the_inventory():
    limits = SanityLimits(inventory={"a100-01": 8, "a100-02": 8})
    rows = [
        alloc(JobID="1", JobIDRaw="1", AllocTRES="gres/gpu=8"),  # the whole node: fine
        alloc(JobID="2", JobIDRaw="2", AllocTRES="gres/gpu=9"),  # one more than it has
        alloc(JobID="3", JobIDRaw="3", NodeList="a100-[01-02]", AllocTRES="gres/gpu=16"),
        alloc(JobID="4", JobIDRaw="4", NodeList="a100-[01-02]", AllocTRES="gres/gpu=17"),
    ]
    parsed = _parse(rows, limits)
    assert parsed.runs["job_id"].to_list() == ["1", "3"]
    by_line = {r.line_no: r for r in parsed.rejects}
    assert by_line[3].field == "AllocTRES"
    assert by_line[3].reason == ("sanity limit gpus_per_node: expected at most 8 GPUs on a100-01 "
                                 "(its gpu_count in the nodes inventory), found 9 GPUs in "
                                 "AllocTRES")
    assert by_line[5].reason == (
        "sanity limit gpus_per_node: expected at most 16 GPUs on the run's 2 nodes a100-[01-02] "
        "(a100-01: 8 in the inventory; a100-02: 8 in the inventory), found 17 GPUs in AllocTRES "
        "(up to 9 per node by the even split)")


def test_without_inventory_the_per_node_ceiling_applies_and_nodes_not_listed_are_fine():
    rows = [
        alloc(JobID="1", JobIDRaw="1", AllocTRES="gres/gpu=64"),
        alloc(JobID="2", JobIDRaw="2", AllocTRES="gres/gpu=65"),
        alloc(JobID="3", JobIDRaw="3", NodeList="gpu-07", AllocTRES="gres/gpu=12"),
    ]
    # no inventory at all (a test loading only sacct): 64 per node
    parsed = _parse(rows)
    assert parsed.runs["job_id"].to_list() == ["1", "3"]
    r = _only_reject(parsed)
    assert r.reason.startswith("sanity limit gpus_per_node: expected at most 64 GPUs on a100-01 "
                               "(it is not in the nodes inventory: max_gpus_per_node)")
    # an inventory that does not list gpu-07: still fine there (held to the ceiling only)
    parsed = _parse(rows, SanityLimits(inventory={"a100-01": 8}))
    assert parsed.runs["job_id"].to_list() == ["3"]
    assert {r.line_no for r in parsed.rejects} == {2, 3}


def test_a_run_that_fits_its_uneven_nodes_loads_though_its_even_split_does_not():
    # 12 GPUs on an 8- and a 4-GPU node: Slurm gave 8 + 4; the even split (6 + 6) is only the
    # ledger's estimate (gpus_source even_split), so the real run is not thrown away
    limits = SanityLimits(inventory={"big": 8, "small": 4})
    rows = [alloc(JobID="1", JobIDRaw="1", NodeList="big,small", AllocTRES="gres/gpu=12"),
            alloc(JobID="2", JobIDRaw="2", NodeList="big,small", AllocTRES="gres/gpu=13")]
    parsed = _parse(rows, limits)
    assert parsed.runs["job_id"].to_list() == ["1"]
    assert _only_reject(parsed).reason.startswith(
        "sanity limit gpus_per_node: expected at most 12 GPUs on the run's 2 nodes big,small "
        "(big: 8 in the inventory; small: 4 in the inventory), found 13")


def test_node_names_are_looked_up_as_the_ledger_names_them():
    limits = SanityLimits(inventory={"a100-01": 8},
                          canonical=lambda raw: raw.split(".", 1)[0])
    rows = [alloc(JobID="1", JobIDRaw="1", NodeList="a100-01.cluster.example",
                  AllocTRES="gres/gpu=9")]
    r = _only_reject(_parse(rows, limits))
    assert "on a100-01.cluster.example (its gpu_count in the nodes inventory)" in r.reason


def test_end_before_start_is_rejected_not_stored_and_charged_nothing():
    rows = [alloc(), alloc(JobID="8", JobIDRaw="8", Start=str(T0 + 500), End=str(T0 + 400),
                           ElapsedRaw="0")]
    parsed = _parse(rows)
    r = _only_reject(parsed)
    assert (r.line_no, r.field) == (3, "End")
    assert r.reason == ("sanity limit end_before_start: expected End at or after Start "
                        "(2026-11-30 05:52:04 UTC), found End 2026-11-30 05:50:24 UTC, 100 s "
                        "before it")
    assert parsed.runs["job_id"].to_list() == ["100"]


def test_absurd_durations_are_rejected_and_the_limit_is_configurable():
    year = 365 * 86_400
    rows = [
        alloc(JobID="1", JobIDRaw="1", End=str(T0 + 5 + year), ElapsedRaw=str(year)),  # 365 d
        alloc(JobID="2", JobIDRaw="2", End=str(T0 + 5 + year + 1), ElapsedRaw=str(year + 1)),
        alloc(JobID="3", JobIDRaw="3", End=str(T0 + 5 + 2 * year), ElapsedRaw="60"),  # suspended?
    ]
    parsed = _parse(rows)
    assert parsed.runs["job_id"].to_list() == ["1"]
    by_line = {r.line_no: r for r in parsed.rejects}
    assert by_line[3].field == "ElapsedRaw"
    assert by_line[3].reason == ("sanity limit elapsed_too_long: expected a run of at most 365 "
                                 "days (max_elapsed_days), found ElapsedRaw 31,536,001 s (365 "
                                 "days)")
    assert by_line[4].field == "End"
    assert "Start 2026-11-30 05:43:49 UTC and End" in by_line[4].reason
    assert "(730 days apart)" in by_line[4].reason
    # a site with shorter jobs says so
    short = SanityLimits.from_config({"max_elapsed_days": 0.5})
    parsed = _parse([alloc(ElapsedRaw=str(86_400))], short)
    assert _only_reject(parsed).reason.startswith(
        "sanity limit elapsed_too_long: expected a run of at most 43,200 s (max_elapsed_days)")


def test_a_run_still_going_is_held_to_how_far_it_is_charged():
    going = alloc(JobID="9", JobIDRaw="9", State="RUNNING", End="Unknown", ElapsedRaw="100")
    until = UTC0 + timedelta(seconds=T0 + 5 + 400 * 86_400)
    parsed = _parse([going], SanityLimits(charged_until=until))
    r = _only_reject(parsed)
    assert r.field == "Start"
    assert r.reason.startswith("sanity limit elapsed_too_long: expected a run still going to "
                               "have started at most 365 days (max_elapsed_days) before the "
                               "time it is charged up to (2028-01-04 05:43:49 UTC), found Start "
                               "2026-11-30 05:43:49 UTC (400 days before)")
    # not known at parse time (a dump's latest instant): sacct's Elapsed is what is checked
    assert _parse([going]).rejects == []


def test_times_after_the_observation_are_rejected_beyond_the_clock_skew():
    limits = SanityLimits(observed_at=SEEN, observed_what="the dump's --as-of time")
    skew = 300
    rows = [
        alloc(JobID="1", JobIDRaw="1", Start=str(T0 + 3600 + skew), End=str(T0 + 3600 + skew)),
        alloc(JobID="2", JobIDRaw="2", Start=str(T0 + 3600), End=str(T0 + 3600 + skew + 1)),
        alloc(JobID="3", JobIDRaw="3", Submit=str(T0 + 90_000), Eligible=str(T0 + 90_000),
              Start="Unknown", End="Unknown", State="PENDING", NodeList="None assigned",
              AllocTRES=""),
        # eligible later is normal (sbatch --begin); a pending job's Start is an estimate
        alloc(JobID="4", JobIDRaw="4", Eligible=str(T0 + 90_000), Start=str(T0 + 90_000),
              End="Unknown", State="PENDING", NodeList="None assigned", AllocTRES=""),
    ]
    parsed = _parse(rows, limits)
    assert parsed.runs["job_id"].to_list() == ["1", "4"]
    by_line = {r.line_no: r for r in parsed.rejects}
    assert by_line[3].field == "End"
    assert by_line[3].reason == ("sanity limit time_in_future: expected End no later than the "
                                 "dump's --as-of time (2026-11-30 06:43:44 UTC, 300 s of clock "
                                 "skew allowed), found 2026-11-30 06:48:45 UTC")
    assert by_line[4].field == "Submit"
    # without an observation time nothing is in the future
    assert _parse(rows).rejects == []


def test_steps_are_not_held_to_the_limits():
    a = alloc()
    odd_step = step(a, "0", Start=str(T0 + 50), End=str(T0 + 10))  # never charged
    parsed = _parse([a, odd_step])
    assert parsed.rejects == []
    assert parsed.steps.height == 1


def test_the_first_rule_broken_is_the_reason_and_rules_are_counted():
    rows = [
        alloc(JobID="1", JobIDRaw="1", AllocTRES="gres/gpu=200000", End=str(T0 - 10)),
        alloc(JobID="2", JobIDRaw="2", End=str(T0 - 10)),
        alloc(JobID="3", JobIDRaw="3", State="not a state"),  # a parse reject, not a sanity one
    ]
    parsed = _parse(rows)
    assert [rule_of(r) for r in parsed.rejects] == ["gpus_per_job", "end_before_start", None]
    counts = counts_by_rule(parsed.rejects)
    assert list(counts) == list(RULES)
    assert counts == {"gpus_per_job": 1, "gpus_per_node": 0, "end_before_start": 1,
                      "elapsed_too_long": 0, "time_in_future": 0}


def test_streamed_batches_reject_the_same_lines(tmp_path: Path):
    limits = SanityLimits(inventory={"a100-01": 2}, observed_at=SEEN)
    rows = []
    for j in range(40):
        a = alloc(JobID=str(j), JobIDRaw=str(j), AllocTRES=f"gres/gpu={j % 4}",
                  End=str(T0 + (4000 if j % 9 == 0 else 60)))
        rows += [a, step(a, "batch")]
    path = tmp_path / "d.txt"
    path.write_text(dump(rows), encoding="utf-8")
    whole = parse_sacct(path, source_file="d", limits=limits)
    batches = list(iter_sacct_batches(path, source_file="d", batch_bytes=600, limits=limits))
    assert len(batches) > 3
    assert [r for b in batches for r in b.rejects] == whole.rejects
    assert {rule_of(r) for r in whole.rejects} == {"gpus_per_node", "time_in_future"}
    assert pl.concat([b.runs for b in batches]).equals(whole.runs)


@pytest.mark.parametrize(("table", "message"), [
    ({"max_gpus_per_nod": 8}, "expected slurm_limits keys among max_gpus_per_node, "
                              "max_gpus_per_job, max_elapsed_days, clock_skew_seconds, found "
                              "max_gpus_per_nod"),
    ({"max_gpus_per_node": 0}, "expected slurm_limits.max_gpus_per_node as a whole number of "
                               "GPUs, at least 1, found 0"),
    ({"max_gpus_per_job": 2.5}, "expected slurm_limits.max_gpus_per_job as a whole number of "
                                "GPUs, at least 1, found 2.5"),
    ({"max_elapsed_days": "a year"}, "expected slurm_limits.max_elapsed_days as a number of "
                                     "days above 0, found 'a year'"),
    ({"clock_skew_seconds": -1}, "expected slurm_limits.clock_skew_seconds as a number of "
                                 "seconds, 0 or more, found -1"),
    ({"max_gpus_per_node": True}, "found True"),
])
def test_configured_limits_are_checked(table: dict, message: str):
    with pytest.raises(ValueError, match=re.escape(message)):
        SanityLimits.from_config(table)


def test_configured_limits_keep_the_defaults_they_do_not_name():
    limits = SanityLimits.from_config({"max_gpus_per_node": 16, "clock_skew_seconds": 0})
    assert limits.as_config() == {"max_gpus_per_node": 16, "max_gpus_per_job": 100_000,
                                  "max_elapsed_days": 365.0, "clock_skew_seconds": 0.0}
    assert SanityLimits.from_config(limits.as_config()) == limits
    assert SanityLimits.from_config(None) == DEFAULT_LIMITS
