"""Kueue Workload objects as Kueue's releases write them (tests/fixtures/kueue, sources there).

Preemption before 0.7 (only an Evicted condition with reason Preempted), eviction counts from
schedulingStats (or the conditions), never from requeueState.count, GPUs under configurable
resource names (DRA), and bad items rejected one by one with their JSON path.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime
from pathlib import Path

import pytest

from connectors.errors import SourceError
from connectors.kubernetes.workload_conditions import workload_row
from connectors.kubernetes.workload_fields import BadField, parse_quantity
from connectors.kubernetes.workload_snapshot import read_workload_snapshot
from tests.helpers import FIXTURES

KUEUE = FIXTURES / "kueue"
COLUMNS = ("evicted", "evicted_reason", "preempted", "eviction_count", "eviction_count_source",
           "eviction_reasons", "requeue_count")


def rows(name: str, **kw) -> dict[str, dict]:
    snap = read_workload_snapshot(KUEUE / name, **kw)
    assert snap.rejects == []
    return {r["name"]: r for r in snap.workloads.iter_rows(named=True)}


def pick(row: dict, columns=COLUMNS) -> tuple:
    return tuple(row[c] for c in columns)


def test_preemption_before_0_7_shows_only_as_an_evicted_condition():
    got = rows("v0.6-preempted-evicted-only.json")
    assert pick(got["job-sample-job-preempted"]) == (
        True, "Preempted", True, 1, "conditions", "Preempted=1", None)
    # re-admitted: Evicted went False and 0.6 kept its reason
    readmitted = got["job-sample-job-readmitted"]
    assert pick(readmitted) == (False, "Preempted", True, 1, "conditions", "Preempted=1", None)
    assert readmitted["admitted_at"] == datetime(2024, 2, 1, 10, 45)


def test_preempted_condition_of_0_7_and_later():
    row = rows("v0.7-docs-preempted.json")["job-low-priority-preempted"]
    assert pick(row) == (True, "Preempted", True, 1, "conditions", "Preempted=1", None)
    assert row["evicted_at"] == datetime(2024, 5, 31, 18, 42, 33)
    assert row["evicted_message"].startswith("Preempted to accommodate a workload")


def test_readmitted_after_pods_ready_timeout_remembers_the_eviction_from_its_message():
    row = rows("issue-2291-podsready-timeout-readmitted.json")["job-sample-job-992ea"]
    assert pick(row) == (False, "PodsReadyTimeout", False, 1, "conditions",
                         "PodsReadyTimeout=1", None)
    assert (row["admitted"], row["pods_ready"], row["pods_wanted"], row["gpus_admitted"]) == (
        True, False, 3, 3)


def test_eviction_count_is_never_the_requeue_backoff_count(tmp_path: Path):
    # the docs' requeueState example (concepts/workload.md: count 5) on the #2291 Workload,
    # which has no schedulingStats: 5 backoff requeues are not 5 evictions
    doc = json.loads((KUEUE / "issue-2291-podsready-timeout-readmitted.json").read_text())
    doc["items"][0]["status"]["requeueState"] = {"count": 5, "requeueAt": "2024-02-11T04:51:03Z"}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    row = read_workload_snapshot(path).workloads.row(0, named=True)
    assert (row["eviction_count"], row["eviction_count_source"], row["requeue_count"],
            row["requeue_at"]) == (1, "conditions", 5, datetime(2024, 2, 11, 4, 51, 3))


def test_scheduling_stats_count_every_eviction_the_conditions_forgot():
    row = rows("v0.12-scheduling-stats-two-evictions.json")["wl"]
    # the conditions show the latest eviction (Deactivated) only; the stats keep both
    assert pick(row) == (True, "Deactivated", False, 2, "schedulingStats",
                         "Deactivated=1,PodsReadyTimeout=1", None)
    assert row["active"] is False
    row = rows("issue-14811-recovery-eviction.json")["jobset-trainer-7f3a1"]
    assert pick(row) == (True, "PodsReadyTimeout", False, 1, "schedulingStats",
                         "PodsReadyTimeout=1", 1)
    assert (row["quota_reserved"], row["admitted"], row["cluster_queue"], row["gpus_per_pod"],
            row["gpus_admitted"], row["flavor"]) == (True, True, "ml-cq", 8, 32, "h100")


def test_many_pod_sets_and_admitted_gpus():
    row = rows("issue-6035-admission-900-gpus.json")["raycluster-ml-infra-a10"]
    assert (row["pod_sets"], row["pods_wanted"], row["gpus_per_pod"], row["gpus_admitted"],
            row["flavor"], row["gpu_resource"], row["pending_message"]) == (
        3, 902, 1, 900, "vm-gpu-a10-2", "nvidia.com/gpu", None)


def test_gpu_resource_names_are_configurable_for_dra():
    name = "job-sample-dra-rct-job-x7k2p-3f1c2"
    default = rows("dra-resource-claim-template.json")[name]
    # the claim's device is not an nvidia.com/gpu request: no GPU seen under the default name
    assert (default["gpus_per_pod"], default["gpus_admitted"], default["gpu_resource"]) == (
        0, None, None)
    dra = rows("dra-resource-claim-template.json", gpu_resources=("example.com/gpu",))[name]
    # the template has no count for a claim: Kueue's resourceUsage / pods is the per-pod figure
    assert (dra["gpus_per_pod"], dra["gpus_admitted"], dra["gpu_resource"], dra["flavor"]) == (
        1, 1, "example.com/gpu", "default-flavor")


def test_each_bad_item_is_rejected_alone_with_its_json_path():
    snap = read_workload_snapshot(KUEUE / "bad-items-one-defect-each.json")
    assert sorted(snap.workloads["name"].to_list()) == ["my-workload", "my-workload-just-created"]
    assert snap.raw["uid"].to_list() == snap.workloads["uid"].to_list()
    got = [(r.line_no, r.field, r.reason) for r in snap.rejects]
    assert got == [
        (1, "items[1].status", "expected an object or no field, found null"),
        (2, "items[2].spec.podSets", "expected an array, found null"),
        (3, "items[3].spec.podSets", "expected an array, found none"),
        (4, "items[4].spec.podSets[0].count", "expected an integer >= 0, found a string '3'"),
        (5, "items[5].status.conditions[0].lastTransitionTime",
         "expected an RFC 3339 time, found a string 'yesterday'"),
        (6, "items[6].metadata.uid", "expected a non-empty string, found none"),
        (7, "items[7].status.conditions", "expected an array or no field, found null"),
        (8, 'items[8].spec.podSets[0].template.spec.containers[0].resources.requests'
            '["nvidia.com/gpu"]', "expected a whole number of devices, found a string '500m'"),
        (9, "items[9].status.admission.clusterQueue", "expected a string, found null"),
        (10, "items[10]", "expected a Workload object, found a string 'not a Workload'"),
        (11, "items[11].metadata.uid", "expected a uid not already at item 0, found a string "
                                       "'a0000000-0000-4000-8000-00000000d0c2'"),
    ]
    assert all(r.source == "kueue_workloads" and r.raw for r in snap.rejects)
    created = snap.workloads.filter(snap.workloads["name"] == "my-workload-just-created")
    # no status yet is not an error: not reserved, not admitted, nothing evicted
    assert created.select("quota_reserved", "admitted", "eviction_count").row(0) == (
        False, False, 0)


def test_docs_examples_with_a_wrong_shape_are_rejected():
    snap = read_workload_snapshot(KUEUE / "docs-preemption-status-as-list.json")
    assert [(r.field, r.reason) for r in snap.rejects] == [
        ("items[0].status", "expected an object, found an array of 2")]
    snap = read_workload_snapshot(KUEUE / "docs-v1beta2-created-admitted-pending.json")
    assert [(r.line_no, r.field, r.reason) for r in snap.rejects] == [
        (2, "items[2].status.resourceRequests", "expected an array, found an object")]
    assert sorted(snap.workloads["name"].to_list()) == ["my-workload", "sample-job"]


def test_a_file_that_is_no_kubectl_list_is_refused_whole(tmp_path: Path):
    path = tmp_path / "w.json"
    path.write_text(json.dumps([{"kind": "Workload"}]))
    with pytest.raises(SourceError, match="expected a kubectl List"):
        read_workload_snapshot(path)


def _pod_set(containers, init=()) -> dict:
    return {"count": 2, "name": "main", "template": {"spec": {
        "containers": [{"name": f"c{i}", "resources": {"requests": {"nvidia.com/gpu": g}}}
                       for i, g in enumerate(containers)],
        "initContainers": [{"name": f"i{i}", "restartPolicy": policy,
                            "resources": {"limits": {"nvidia.com/gpu": g}}}
                           for i, (g, policy) in enumerate(init)]}}}


@pytest.mark.parametrize(("containers", "init", "per_pod"), [
    (["1", "1"], (), 2),  # containers add up
    (["1"], (("4", "Never"),), 4),  # an init container larger than the main ones
    (["1"], (("1", "Always"), ("1", "Never")), 2),  # a sidecar runs beside the containers
    (["0"], (("2", "OnFailure"),), 2),  # GPUs only in an init container
])
def test_gpus_per_pod_follow_the_scheduler_rule(containers, init, per_pod):
    base = json.loads((KUEUE / "docs-v1beta2-created-admitted-pending.json").read_text())
    item = copy.deepcopy(base["items"][0])
    item["spec"]["podSets"] = [_pod_set(containers, init)]
    assert workload_row(item, "x")["gpus_per_pod"] == per_pod


@pytest.mark.parametrize(("text", "value"), [
    ("2", 2), (2, 2), ("1k", 1000), ("1Ki", 1024), ("1e1", 10), ("2000m", 2), ("0.5", 0.5),
    ("x", None), ("", None), (True, None), (float("nan"), None),
])
def test_kubernetes_quantities(text, value):
    got = parse_quantity(text)
    assert (got if got is None else float(got)) == value


def test_a_gpu_count_must_be_whole():
    with pytest.raises(BadField, match=r"whole number of devices, found a string '1\.5'"):
        workload_row({"metadata": {"uid": "u", "name": "n", "namespace": "ns"},
                      "spec": {"podSets": [_pod_set(["1.5"])]}}, "x")
