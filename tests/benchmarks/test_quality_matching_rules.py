"""The matching rules of benchmarks/detector_quality.md, on hand-made incidents.

The decoy rows below are copied from ``world.json`` of ``python -m simulator --seed 101 --days 2
--nodes hpc=8,k8s=12,shared=6 --step 60 --realistic`` (simulator/planted_real.py writes them).
"""

import json
from datetime import datetime, timedelta
from pathlib import Path

from benchmarks.detector_quality import (
    Span,
    decoy_spans,
    flagged_decoys,
    owner,
    score,
    world_dir,
)

T0 = datetime(2026, 1, 5, 8, 0)
HOUR = timedelta(hours=1)
GPU_A = "GPU-3623470c-8439-1eb4-2974-c51c47979e81"
GPU_B = "GPU-228c62f3-e32f-b3c2-0bb1-597c2e3babfb"


def span(kind="double_scheduled", start=T0, end=T0 + HOUR, gpus=(GPU_A,), nodes=("gpu-shr-02",),
         seconds=3600, job="24208", workload="team-vision/vit-finetune-000035", label="x"):
    return Span(kind, frozenset(nodes), start, end, seconds, job, owner(workload), label,
                frozenset(gpus))


def test_a_detection_covering_under_half_of_the_planted_time_is_a_miss_and_a_false_alarm():
    planted = [span()]
    sliver = [span(end=T0 + timedelta(minutes=25), seconds=1500)]
    s = score(sliver, planted)["double_scheduled"]
    assert (s.matched, s.recall, s.precision) == (0, 0.0, 0.0)
    assert len(s.misses) == 1
    assert len(s.false_alarms) == 1
    s = score([span(end=T0 + timedelta(minutes=31), seconds=1860)], planted)["double_scheduled"]
    assert s.matched == 1


def test_a_detection_smeared_far_beyond_the_planted_time_does_not_match():
    s = score([span(end=T0 + 3 * HOUR, seconds=10800)], [span()])["double_scheduled"]
    assert s.matched == 0


def test_another_gpu_of_the_same_node_is_another_subject_unless_one_side_names_no_gpu():
    assert score([span(gpus=(GPU_B,))], [span()])["double_scheduled"].matched == 0
    assert score([span(gpus=())], [span()])["double_scheduled"].matched == 1  # node evidence


def test_a_gang_matches_its_owner_under_kueue_workload_naming_not_another_owner():
    planted = [span("partial_gang", workload="team-llm/job-llm-train-000029-1bfb4", job="")]
    found = [span("partial_gang", workload="team-llm/llm-train-000029", job="")]
    other = [span("partial_gang", workload="team-llm/llm-train-000030", job="")]
    s = score(found, planted)["partial_gang"]
    assert (s.matched, s.keys_agree) == (1, 1)
    assert score(other, planted)["partial_gang"].matched == 0


def test_one_incident_found_twice_is_one_match_and_one_false_alarm_and_both_are_wasted():
    planted = [span()]
    late = T0 + timedelta(minutes=2)  # the second finding covers less: the first is the match
    twice = [span(seconds=3600, label="a"), span(start=late, seconds=3480, label="b")]
    s = score(twice, planted)["double_scheduled"]
    assert (s.matched, s.detected, s.precision) == (1, 2, 0.5)
    assert s.waste_error == 0.0  # the matched pair is exact
    assert s.false_alarms == ["b"]
    assert abs(s.total_error - 3480 / 3600) < 1e-9  # what a page summing incidents shows


def _world(tmp_path: Path, decoys: list[dict]) -> Path:
    (tmp_path / "world.json").write_text(json.dumps({"decoys": decoys}), encoding="utf-8")
    return tmp_path


HANDOVER = {"at": "2026-01-05T08:00:00", "gap_seconds": 25, "gpu_uuids": [GPU_A, GPU_B],
            "imitates": "double_scheduled", "kind": "handover_gap", "node": "gpu-shr-02",
            "pod": "team-vision/vit-finetune-000035-0-jwkll", "slurm_job": "24208",
            "why_not_an_incident": "the pod starts 25 s after the Slurm job ended"}
QUICK_GANG = {"at": "2026-01-05T12:30:02", "imitates": "partial_gang", "kind": "quick_gang",
              "pods": 4, "pods_ready_after_admission_seconds": 182, "start_spread_seconds": 172,
              "why_not_an_incident": "all pods ran within 172 s of the first (below "
                                     "gang_grace_seconds 300)",
              "workload": "team-llm/job-llm-train-000030-da820"}
ZERO_PHASE = {"at": "2026-01-05T09:01:00",
              "gpu_uuids": ["GPU-afce03ad-15e9-ed7f-e421-8f1997c35598"],
              "imitates": "idle_allocation", "kind": "short_zero_phase", "node": "gpu-k8s-03",
              "pod": "research/notebook-000001", "until": "2026-01-05T09:25:00",
              "why_not_an_incident": "0-3% for 24 min only (the rule needs 30)"}


def test_decoys_are_flagged_by_subject_and_time_or_by_their_gang_owner(tmp_path):
    decoys = decoy_spans(_world(tmp_path, [HANDOVER, QUICK_GANG, ZERO_PHASE]))
    assert [d.kind for d in decoys] == ["double_scheduled", "partial_gang", "idle_allocation"]
    # the handover decoy: its GPUs around its instant, or its Slurm job
    near = span(start=T0 + timedelta(minutes=5), end=T0 + HOUR, gpus=(GPU_B,))
    by_job = span(start=T0, end=T0 + HOUR, gpus=(), nodes=("elsewhere",))
    later = span(start=T0 + 2 * HOUR, end=T0 + 3 * HOUR)
    assert len(flagged_decoys([near], decoys)) == 1
    assert len(flagged_decoys([by_job], decoys)) == 1
    assert flagged_decoys([later], decoys) == []
    # the quick gang: its owner at any time flags it
    gang = span("partial_gang", start=T0 + 9 * HOUR, end=T0 + 10 * HOUR, job="",
                workload="team-llm/llm-train-000030", nodes=("gpu-k8s-07",))
    assert len(flagged_decoys([gang], decoys)) == 1
    # the zero phase: an idle finding on its GPU inside [at, until); none after it
    zero = ZERO_PHASE["gpu_uuids"]
    inside = span("idle_allocation", start=datetime(2026, 1, 5, 9, 1),
                  end=datetime(2026, 1, 5, 9, 40), gpus=zero, nodes=("gpu-k8s-03",), job="")
    after = span("idle_allocation", start=datetime(2026, 1, 5, 9, 30),
                 end=datetime(2026, 1, 5, 10, 30), gpus=zero, nodes=("gpu-k8s-03",), job="")
    assert len(flagged_decoys([inside], decoys)) == 1
    assert flagged_decoys([after], decoys) == []
    # another kind never flags a decoy
    assert flagged_decoys([span("idle_allocation", gpus=(GPU_A,))], decoys) == []


def test_a_cached_world_is_keyed_by_seed_and_arguments():
    assert world_dir(101, 7) != world_dir(102, 7)
    assert world_dir(101, 7) != world_dir(101, 2)
    assert world_dir(101, 7) == world_dir(101, 7)
    assert world_dir(101, 7).parent.name == ".cache"
