"""One ``kueue_workloads`` row per Kueue Workload object: identity, pod sets, GPUs, conditions.

Every field is read through ``workload_fields`` so a bad item raises ``BadField`` (JSON path and
"expected …, found …") and is rejected alone. Rules (docs/kubernetes.md, "Kueue Workloads"):

* **Preemption.** Kueue >= 0.7 adds a ``Preempted`` condition; before, a preemption shows only
  as an ``Evicted`` condition with reason ``Preempted`` (0.6 keeps that reason when the
  condition goes back to False at re-admission; 0.7+ writes reason ``QuotaReserved`` and
  message ``Previously: <the eviction's message>``). Any of these marks the Workload preempted.
* **Eviction counts** come from ``status.schedulingStats.evictions`` (per reason and underlying
  cause, Kueue >= 0.12). Without it the conditions show at most the latest eviction: an
  ``Evicted`` condition means one (a lower bound; ``eviction_count_source`` says which).
  ``status.requeueState.count`` counts PodsReadyTimeout backoffs only (docs
  ``concepts/workload.md``) and is kept as ``requeue_count``, never as an eviction count.
* **GPUs.** The configured resource names (default ``nvidia.com/gpu``; a DRA workload's is the
  logical name of Kueue's ``deviceClassMappings``) are counted per pod from the pod template
  (``max(max(init containers), sum(containers) + sum(sidecars))``), else from the admission's
  ``resourceUsage`` (or ``status.resourceRequests``) divided by the pod count, which is where a
  DRA claim's devices appear.
* **Elastic jobs** (``ElasticJobsViaWorkloadSlices``): ``elastic`` (annotation
  ``kueue.x-k8s.io/elastic-job`` "true"), ``slice_of`` (``workload-slice-replacement-for``, the
  slice a scale-up replaces, ``namespace/name``) and ``slice_name`` (``workload-slice-name``, the
  chain's first slice, Kueue >= 0.16).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import polars as pl

from connectors.frame_types import SchemaDict
from connectors.kubernetes.workload_fields import (
    BadField,
    boolean,
    count_quantity,
    integer,
    join,
    obj,
    objects,
    string,
    timestamp,
)

DEFAULT_GPU_RESOURCES = ("nvidia.com/gpu",)
TS = pl.Datetime("us")

# messages Kueue writes on eviction (pkg/workload, pkg/controller/core), kept after
# "Previously: " when the Evicted condition is reset at re-admission (0.7+)
_EVICTION_MESSAGES = (
    ("Preempted to accommodate", "Preempted"),
    ("Exceeded the PodsReady timeout", "PodsReadyTimeout"),
    ("The workload is deactivated", "Deactivated"),
    ("The ClusterQueue is stopped", "ClusterQueueStopped"),
    ("The LocalQueue is stopped", "LocalQueueStopped"),
    ("At least one admission check is false", "AdmissionCheck"),
)
_CONDITION_STATUS = ("True", "False", "Unknown")

WORKLOAD_TYPES: SchemaDict = {
    "uid": pl.String, "namespace": pl.String, "name": pl.String, "queue_name": pl.String,
    "cluster_queue": pl.String, "owner_kind": pl.String, "owner_name": pl.String,
    "owner_uid": pl.String, "priority": pl.Int64, "active": pl.Boolean, "pod_sets": pl.Int32,
    "pods_wanted": pl.Int32, "min_count": pl.Int32, "gpus_per_pod": pl.Int64,
    "gpus_admitted": pl.Int64, "gpu_resource": pl.String, "flavor": pl.String,
    "created_at": TS, "quota_reserved": pl.Boolean, "quota_reserved_at": TS,
    "admitted": pl.Boolean, "admitted_at": TS, "pods_ready": pl.Boolean, "pods_ready_at": TS,
    "evicted": pl.Boolean, "evicted_at": TS, "evicted_reason": pl.String,
    "evicted_message": pl.String, "preempted": pl.Boolean, "eviction_count": pl.Int32,
    "eviction_count_source": pl.String, "eviction_reasons": pl.String,
    "requeue_count": pl.Int32, "requeue_at": TS, "finished": pl.Boolean, "finished_at": TS,
    "finished_reason": pl.String, "pending_message": pl.String, "source_file": pl.String,
    "elastic": pl.Boolean, "slice_of": pl.String, "slice_name": pl.String,
}
# Kueue elastic jobs (pkg/constants ElasticJobAnnotation, pkg/workloadslicing
# WorkloadSliceReplacementFor, apis/kueue/v1beta2 WorkloadSliceNameAnnotation)
ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"
SLICE_REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
SLICE_NAME = "kueue.x-k8s.io/workload-slice-name"


class _Condition:
    __slots__ = ("at", "message", "reason", "true")

    def __init__(self, true: bool, at: datetime, reason: str | None, message: str | None):
        self.true, self.at, self.reason, self.message = true, at, reason, message


def _conditions(status: dict[str, Any]) -> dict[str, _Condition]:
    out: dict[str, _Condition] = {}
    for i, c in enumerate(objects(status, "conditions", "status")):
        path = join("status.conditions", i)
        kind = string(c, "type", path, required=True, nonempty=True)
        state = string(c, "status", path, required=True)
        if state not in _CONDITION_STATUS:
            raise BadField(join(path, "status"), "True, False or Unknown", state)
        if kind in out:  # metav1 conditions are a map by type
            raise BadField(join(path, "type"), f"each condition type once, {kind!r} again",
                           kind)
        at = timestamp(c, "lastTransitionTime", path, required=True)
        out[kind] = _Condition(state == "True", at, string(c, "reason", path),
                               string(c, "message", path))
    return out


def _gpus(container: dict[str, Any], path: str, resources: Sequence[str],
          seen: set[str]) -> int:
    res = obj(container, "resources", path) or {}
    rpath = join(path, "resources")
    requests = obj(res, "requests", rpath) or {}
    limits = obj(res, "limits", rpath) or {}
    total = 0
    for name in resources:
        # an extended resource's limit is its request when no request is given
        got = count_quantity(requests, name, join(rpath, "requests")) if name in requests \
            else count_quantity(limits, name, join(rpath, "limits"))
        if got is not None:
            seen.add(name)
            total += got
    return total


def _template_gpus(pod_set: dict[str, Any], path: str, resources: Sequence[str],
                   seen: set[str]) -> int | None:
    """GPUs one pod of the set holds, from its template; None without a pod template."""
    template = obj(pod_set, "template", path)
    if template is None:
        return None
    spec = obj(template, "spec", join(path, "template"))
    if spec is None:
        return None
    spath = join(join(path, "template"), "spec")
    main = sum(_gpus(c, join(join(spath, "containers"), i), resources, seen)
               for i, c in enumerate(objects(spec, "containers", spath)))
    plain, sidecars = [0], 0
    for i, c in enumerate(objects(spec, "initContainers", spath)):
        cpath = join(join(spath, "initContainers"), i)
        gpus = _gpus(c, cpath, resources, seen)
        if string(c, "restartPolicy", cpath) == "Always":  # a sidecar runs beside the main
            sidecars += gpus
        else:
            plain.append(gpus)
    return max(max(plain), main + sidecars)


def _usage(entry: dict[str, Any], key: str, path: str, resources: Sequence[str],
           seen: set[str]) -> int | None:
    usage = obj(entry, key, path)
    if usage is None:
        return None
    counts = (count_quantity(usage, name, join(path, key)) for name in resources if name in usage)
    found = [n for n in counts if n is not None]  # present keys always count
    seen.update(name for name in resources if name in usage)
    return sum(found) if found else None


def _previous_eviction_reason(evicted: _Condition) -> str | None:
    """The reason of the eviction an Evicted=False condition remembers."""
    if evicted.reason and evicted.reason != "QuotaReserved" and any(
            evicted.reason == r for _, r in _EVICTION_MESSAGES):
        return evicted.reason  # Kueue < 0.7 kept the reason at re-admission
    text = (evicted.message or "").removeprefix("Previously: ")
    return next((r for prefix, r in _EVICTION_MESSAGES if text.startswith(prefix)), None)


def workload_row(item: object, source_file: str,
                 resources: Sequence[str] = DEFAULT_GPU_RESOURCES) -> dict[str, Any]:
    """One ``kueue_workloads`` row from a Workload object; ``BadField`` if it cannot be read."""
    if not isinstance(item, dict):
        where = ""
        raise BadField(where, "a Workload object", item)
    meta = obj(item, "metadata", "", required=True)
    spec = obj(item, "spec", "", required=True)
    status = obj(item, "status", "") or {}  # absent while Kueue has not looked at it yet
    uid = string(meta, "uid", "metadata", required=True, nonempty=True)
    name = string(meta, "name", "metadata", required=True, nonempty=True)
    namespace = string(meta, "namespace", "metadata", required=True, nonempty=True)
    labels = obj(meta, "labels", "metadata") or {}
    notes = obj(meta, "annotations", "metadata") or {}
    owners = objects(meta, "ownerReferences", "metadata")
    owner = next((o for o in owners if o.get("controller") is True), owners[0] if owners else {})
    opath = f"metadata.ownerReferences[{owners.index(owner)}]" if owner else ""
    conditions = _conditions(status)

    seen: set[str] = set()
    pod_sets = objects(spec, "podSets", "spec", required=True)
    if not pod_sets:
        where = "spec.podSets"
        raise BadField(where, "at least one pod set", [])
    counts, per_pod, min_counts = [], [], []
    for i, ps in enumerate(pod_sets):
        path = join("spec.podSets", i)
        count = integer(ps, "count", path, minimum=0)
        counts.append(1 if count is None else count)  # the API's default
        minimum = integer(ps, "minCount", path, minimum=0)
        if minimum is not None:
            min_counts.append(minimum)
        per_pod.append(_template_gpus(ps, path, resources, seen))

    admission = obj(status, "admission", "status") or {}
    assignments = objects(admission, "podSetAssignments", "status.admission")
    admitted_gpus, flavors, assigned = [], set(), {}
    for i, a in enumerate(assignments):
        path = join("status.admission.podSetAssignments", i)
        admitted_gpus.append(_usage(a, "resourceUsage", path, resources, seen))
        for resource, flavor in (obj(a, "flavors", path) or {}).items():
            if resource in resources:
                if not isinstance(flavor, str):
                    raise BadField(join(join(path, "flavors"), resource), "a flavor name",
                                   flavor)
                flavors.add(flavor)
        assigned[string(a, "name", path) or "main"] = (
            admitted_gpus[-1], integer(a, "count", path, minimum=0))
    requested = {}
    for i, r in enumerate(objects(status, "resourceRequests", "status")):
        path = join("status.resourceRequests", i)
        requested[string(r, "name", path) or "main"] = _usage(r, "resources", path, resources,
                                                              seen)
    # a DRA claim's devices are not in the template: use what Kueue counted for the pod set
    for i, ps in enumerate(pod_sets):
        if per_pod[i]:
            continue
        set_name = string(ps, "name", join("spec.podSets", i)) or "main"
        usage, pods = assigned.get(set_name, (None, None))
        usage, pods = (usage, pods) if usage else (requested.get(set_name), None)
        pods = pods or counts[i]
        if usage and pods and usage % pods == 0:
            per_pod[i] = usage // pods

    stats = obj(status, "schedulingStats", "status") or {}
    reasons: dict[str, int] = {}
    for i, e in enumerate(objects(stats, "evictions", "status.schedulingStats")):
        path = join("status.schedulingStats.evictions", i)
        reason = string(e, "reason", path, required=True, nonempty=True)
        reasons[reason] = reasons.get(reason, 0) + integer(e, "count", path, required=True,
                                                           minimum=0)
    requeue = obj(status, "requeueState", "status") or {}
    requeue_count = integer(requeue, "count", "status.requeueState", minimum=0)
    requeue_at = timestamp(requeue, "requeueAt", "status.requeueState")

    evicted = conditions.get("Evicted")
    preempted_cond = conditions.get("Preempted")
    latest = None
    if evicted is not None:
        latest = evicted.reason if evicted.true else _previous_eviction_reason(evicted)
    if latest is None and preempted_cond is not None:
        latest = "Preempted"
    if latest is None and reasons:
        latest = max(sorted(reasons), key=lambda r: reasons[r])
    reason_text: str | None
    if reasons:
        eviction_count = max(sum(reasons.values()), 1 if evicted else 0)
        source, reason_text = "schedulingStats", ",".join(
            f"{r}={n}" for r, n in sorted(reasons.items()))
    elif evicted is not None or preempted_cond is not None:
        eviction_count, source = 1, "conditions"  # the latest one; earlier ones are not kept
        reason_text = f"{latest}=1" if latest else None
    else:
        eviction_count, source, reason_text = 0, None, None
    preempted = (preempted_cond is not None or latest == "Preempted"
                 or (evicted is not None and evicted.reason == "Preempted")
                 or reasons.get("Preempted", 0) > 0)

    def state(kind: str) -> tuple[bool, datetime | None, str | None, str | None]:
        c = conditions.get(kind)
        if c is None:
            return False, None, None, None
        return c.true, c.at if c.true else None, c.reason, c.message

    quota, quota_at, _, quota_msg = state("QuotaReserved")
    admitted, admitted_at, _, _ = state("Admitted")
    ready, ready_at, _, _ = state("PodsReady")
    is_evicted, evicted_at, _, evicted_msg = state("Evicted")
    finished, finished_at, finished_reason, _ = state("Finished")
    known = [g for g in per_pod if g is not None]
    return {
        "uid": uid,
        "namespace": namespace,
        "name": name,
        "queue_name": string(spec, "queueName", "spec") or None,
        "cluster_queue": string(admission, "clusterQueue", "status.admission",
                                required=bool(admission)) or None,
        "owner_kind": string(owner, "kind", opath) if owner else None,
        "owner_name": string(owner, "name", opath) if owner else None,
        "owner_uid": (string(owner, "uid", opath) if owner else None)
        or (labels.get("kueue.x-k8s.io/job-uid") if isinstance(
            labels.get("kueue.x-k8s.io/job-uid"), str) else None),
        "priority": integer(spec, "priority", "spec"),
        "active": boolean(spec, "active", "spec") is not False,
        "pod_sets": len(pod_sets),
        "pods_wanted": sum(counts),
        "min_count": sum(min_counts) if min_counts else None,
        "gpus_per_pod": max(known) if known else None,
        "gpus_admitted": (sum(g for g in admitted_gpus if g is not None)
                          if any(g is not None for g in admitted_gpus) else None),
        "gpu_resource": ",".join(sorted(seen)) or None,
        "flavor": ",".join(sorted(flavors)) or None,
        "created_at": timestamp(meta, "creationTimestamp", "metadata"),
        "quota_reserved": quota,
        "quota_reserved_at": quota_at,
        "admitted": admitted,
        "admitted_at": admitted_at,
        "pods_ready": ready,
        "pods_ready_at": ready_at,
        "evicted": is_evicted,
        "evicted_at": evicted_at,
        "evicted_reason": latest if eviction_count else None,
        "evicted_message": evicted_msg if is_evicted else None,
        "preempted": preempted,
        "eviction_count": eviction_count,
        "eviction_count_source": source,
        "eviction_reasons": reason_text,
        "requeue_count": requeue_count,
        "requeue_at": requeue_at,
        "finished": finished,
        "finished_at": finished_at,
        "finished_reason": finished_reason if finished else None,
        "pending_message": quota_msg if "QuotaReserved" in conditions and not quota else None,
        "source_file": source_file,
        "elastic": string(notes, ELASTIC_JOB, "metadata.annotations") == "true",
        "slice_of": string(notes, SLICE_REPLACEMENT_FOR, "metadata.annotations") or None,
        "slice_name": string(notes, SLICE_NAME, "metadata.annotations") or None,
    }


def workload_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=WORKLOAD_TYPES, orient="row")
