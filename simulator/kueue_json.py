"""Kueue Workload objects as ``kubectl get workloads.kueue.x-k8s.io -A -o json`` shows them at
the window's end, and the writer of that List.

kubectl lists items sorted by namespace then name; items are written per namespace into a
temporary file and the namespaces concatenated in order at the end, so memory stays flat.
"""

import heapq
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from simulator.k8s_model import AttemptPlan, WorkloadPlan
from simulator.outputs import open_output
from simulator.timefmt import iso_z

API_VERSION = "kueue.x-k8s.io/v1beta1"


class _Conditions:
    """metav1.Conditions kept in first-set order, as the API server returns them."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, object]] = {}

    def set(self, kind: str, status: bool, reason: str, message: str, at: int) -> None:
        old = self.items.get(kind)
        text = "True" if status else "False"
        if old is not None and old["status"] == text and old["reason"] == reason:
            old["message"] = message
            return
        self.items[kind] = {
            "lastTransitionTime": iso_z(at), "message": message, "observedGeneration": 1,
            "reason": reason, "status": text, "type": kind,
        }

    def get(self, kind: str) -> dict[str, object] | None:
        return self.items.get(kind)

    def as_list(self) -> list[dict[str, object]]:
        return list(self.items.values())


def _pending_message(plan: WorkloadPlan) -> str:
    need = plan.count * plan.gpus_per_pod
    return (f"couldn't assign flavors to pod set main: insufficient unused quota for "
            f"nvidia.com/gpu in flavor {plan.flavor}, {need} more needed")


def workload_item(plan: WorkloadPlan, w1: int, resource_version: int) -> dict[str, object]:
    conditions = _Conditions()
    admission: dict[str, object] | None = None
    requeue_state: dict[str, object] | None = None
    evictions: dict[str, int] = {}
    finished = False
    waiting_since = plan.created
    for attempt in plan.attempts:
        if attempt.admitted >= w1:
            if attempt.admitted - waiting_since > 30:
                conditions.set("QuotaReserved", False, "Pending", _pending_message(plan),
                               waiting_since + 1)
            break
        if attempt.admitted - waiting_since > 30:
            conditions.set("QuotaReserved", False, "Pending", _pending_message(plan),
                           waiting_since + 1)
        admission = _admission(plan)
        _admit(conditions, plan, attempt)
        if attempt.ready is not None and attempt.ready < w1:
            conditions.set("PodsReady", True, "Started",
                           "All pods reached readiness and the workload is running",
                           attempt.ready)
        if attempt.ended is None or attempt.ended >= w1:
            break
        if not attempt.evict_reason:
            ok = attempt.outcome == "succeeded"
            conditions.set("Finished", True, "Succeeded" if ok else "Failed",
                           "Job finished successfully" if ok else
                           "Job has reached the specified backoff limit", attempt.ended + 2)
            finished = True
            break
        evictions[attempt.evict_reason] = evictions.get(attempt.evict_reason, 0) + 1
        _evict(conditions, plan, attempt)
        admission = None
        waiting_since = attempt.ended
        if attempt.evict_reason == "PodsReadyTimeout":
            count = evictions[attempt.evict_reason]
            requeue_state = {"count": count}
            if attempt.requeue_at is not None:
                requeue_state["requeueAt"] = iso_z(attempt.requeue_at)
        if attempt.requeue_at is not None and attempt.requeue_at < w1:
            conditions.set("Requeued", True, "BackoffFinished",
                           "The workload backoff was finished", attempt.requeue_at)
    if not plan.attempts:  # never admitted: Kueue keeps saying why
        conditions.set("QuotaReserved", False, "Pending", _pending_message(plan),
                       plan.created + 1)
    status: dict[str, object] = {"conditions": conditions.as_list()}
    if admission is not None:
        status["admission"] = admission
    if requeue_state is not None:
        status["requeueState"] = requeue_state
    if evictions:
        status["schedulingStats"] = {"evictions": [
            {"count": n, "reason": r, "underlyingCause": ""} for r, n in sorted(evictions.items())
        ]}
    metadata: dict[str, object] = {
        "creationTimestamp": iso_z(plan.created),
        "generation": 1 + sum(1 for a in plan.attempts if a.evict_reason),
        "labels": {"kueue.x-k8s.io/job-uid": plan.owner_uid},
        "name": plan.name,
        "namespace": plan.namespace.name,
        "ownerReferences": [_owner_reference(plan)],
        "resourceVersion": str(resource_version),
        "uid": plan.uid,
    }
    if admission is not None and not finished:
        metadata["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    pod_set: dict[str, object] = {"count": plan.count, "name": "main",
                                  "template": _template(plan)}
    if plan.min_count is not None:
        pod_set["minCount"] = plan.min_count
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": metadata,
        "spec": {
            "active": True,
            "podSets": [pod_set],
            "priority": 0,
            "priorityClassSource": "",
            "queueName": plan.local_queue,
        },
        "status": status,
    }


def _admit(conditions: _Conditions, plan: WorkloadPlan, attempt: AttemptPlan) -> None:
    at = attempt.admitted
    conditions.set("QuotaReserved", True, "QuotaReserved",
                   f"Quota reserved in ClusterQueue {plan.cluster_queue}", at)
    conditions.set("Admitted", True, "Admitted", "The workload is admitted", at)
    for kind in ("Evicted", "Preempted"):
        old = conditions.get(kind)
        if old is not None and old["status"] == "True":
            conditions.set(kind, False, "QuotaReserved", f"Previously: {old['message']}", at)
    conditions.set("PodsReady", False, "WaitForStart", "Not all pods are ready or succeeded",
                   at)


def _evict(conditions: _Conditions, plan: WorkloadPlan, attempt: AttemptPlan) -> None:
    assert attempt.ended is not None
    at = attempt.ended
    conditions.set("Evicted", True, attempt.evict_reason, attempt.evict_message, at)
    if attempt.evict_reason == "Preempted":
        conditions.set("Preempted", True, "InCohortReclamation", attempt.evict_message, at)
    conditions.set("QuotaReserved", False, "Pending", attempt.evict_message, at)
    conditions.set("Admitted", False, "NoReservation", "The workload has no reservation", at)
    conditions.set("PodsReady", False, "WaitForStart", "Not all pods are ready or succeeded",
                   at)
    conditions.set("Requeued", False, attempt.evict_reason, attempt.evict_message, at)


def _admission(plan: WorkloadPlan) -> dict[str, object]:
    n = plan.count if plan.admitted_count is None else plan.admitted_count
    return {
        "clusterQueue": plan.cluster_queue,
        "podSetAssignments": [{
            "count": n,
            "flavors": {"cpu": "default-flavor", "memory": "default-flavor",
                        "nvidia.com/gpu": plan.flavor},
            "name": "main",
            "resourceUsage": {"cpu": str(plan.cpus_per_pod * n),
                              "memory": f"{plan.mem_gb_per_pod * n}Gi",
                              "nvidia.com/gpu": str(plan.gpus_per_pod * n)},
        }],
    }


def _owner_reference(plan: WorkloadPlan) -> dict[str, object]:
    api = "batch/v1" if plan.owner_kind == "Job" else "v1"
    return {"apiVersion": api, "blockOwnerDeletion": True, "controller": True,
            "kind": plan.owner_kind, "name": plan.owner_name, "uid": plan.owner_uid}


def _template(plan: WorkloadPlan) -> dict[str, object]:
    labels = {k.replace("kueue_x_k8s_io_queue_name", "kueue.x-k8s.io/queue-name"): v
              for k, v in plan.pod_labels}
    gpus = str(plan.gpus_per_pod)
    spec: dict[str, object] = {
        "containers": [{
            "image": plan.image,
            "name": plan.container,
            "resources": {
                "limits": {"nvidia.com/gpu": gpus},
                "requests": {"cpu": str(plan.cpus_per_pod),
                             "memory": f"{plan.mem_gb_per_pod}Gi",
                             "nvidia.com/gpu": gpus},
            },
        }],
        "restartPolicy": "Never" if plan.owner_kind == "Job" else "Always",
        "serviceAccountName": plan.namespace.service_account,
    }
    if plan.gpu_containers:
        spec.update(_layout_containers(plan))
    return {"metadata": {"labels": labels}, "spec": spec}


def _layout_containers(plan: WorkloadPlan) -> dict[str, list[dict[str, object]]]:
    """The pod template's containers and initContainers of a ``pod_shapes`` GPU layout."""
    main = [c for c in plan.gpu_containers if c.kind == "container"]
    requests: dict[str, str] = {"cpu": str(plan.cpus_per_pod),
                                "memory": f"{plan.mem_gb_per_pod}Gi"}
    resources: dict[str, object] = {"requests": requests}
    if main:
        gpus = str(main[0].gpus)
        requests["nvidia.com/gpu"] = gpus
        resources["limits"] = {"nvidia.com/gpu": gpus}
    init = []
    for c in plan.gpu_containers:
        if c.kind == "container":
            continue
        item: dict[str, object] = {"image": c.image, "name": c.name, "resources": {
            "limits": {"nvidia.com/gpu": str(c.gpus)},
            "requests": {"nvidia.com/gpu": str(c.gpus)}}}
        if c.restart_policy:
            item["restartPolicy"] = c.restart_policy
        init.append(item)
    return {"containers": [{"image": plan.image, "name": plan.container,
                            "resources": resources}], "initContainers": init}


class WorkloadWriter:
    """Streams items into part files, then merges them into the kubectl List sorted by
    (namespace, name). Each part holds names that arrive in order (a name prefix with a
    zero-padded counter); a part that did not is sorted in memory (only small ones do)."""

    def __init__(self, path: Path, tmp_dir: Path, gzip: bool = False) -> None:
        self.path = path.with_name(path.name + ".gz") if gzip else path
        self.gzip = gzip
        self.tmp_dir = tmp_dir
        self.parts: dict[tuple[str, str], TextIO] = {}
        self.last_name: dict[tuple[str, str], str] = {}
        self.unsorted: set[tuple[str, str]] = set()
        self.paths: dict[tuple[str, str], Path] = {}
        self.resource_version = 4_812_000
        self.items = 0

    def add(self, plan: WorkloadPlan, w1: int) -> None:
        self.resource_version += 7
        item = workload_item(plan, w1, self.resource_version)
        key = (plan.namespace.name, _name_prefix(plan.name))
        part = self.parts.get(key)
        if part is None:
            path = self.tmp_dir / f"workloads-{len(self.parts)}.part"
            part = open_output(path, compress=False)
            self.parts[key] = part
            self.paths[key] = path
        if self.last_name.get(key, "") > plan.name:
            self.unsorted.add(key)
        self.last_name[key] = plan.name
        text = "        " + _pretty(item, 2)  # already indented as an item of the List
        part.write(plan.name + "\t" + text.replace("\n", _NEWLINE) + "\n")
        self.items += 1

    def _lines(self, key: tuple[str, str]) -> Iterator[str]:
        path = self.paths[key]
        if key in self.unsorted:
            with path.open(encoding="utf-8") as fh:
                yield from sorted(fh, key=lambda line: line.split("\t", 1)[0])
            return
        with path.open(encoding="utf-8") as fh:
            yield from fh

    def close(self) -> None:
        for part in self.parts.values():
            part.close()
        first = True
        with open_output(self.path, compress=self.gzip) as out:
            out.write('{\n    "apiVersion": "v1",\n    "items": [')
            for ns in sorted({k[0] for k in self.parts}):
                keys = sorted(k for k in self.parts if k[0] == ns)
                merged = heapq.merge(*(self._lines(k) for k in keys),
                                     key=lambda line: line.split("\t", 1)[0])
                for line in merged:
                    text = line.rstrip("\n").split("\t", 1)[1].replace(_NEWLINE, "\n")
                    out.write(("\n" if first else ",\n") + text)
                    first = False
            out.write("\n    ],\n" if not first else "],\n")
            out.write('    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n'
                      "    }\n}\n")
        for path in self.paths.values():
            path.unlink()


def _name_prefix(name: str) -> str:
    """The part of a name before its first digit: names of one prefix carry a counter."""
    for i, ch in enumerate(name):
        if ch.isdigit():
            return name[:i]
    return name


_NEWLINE = "\x1e"  # stands for a line break inside a part file (JSON escapes real ones)
_quote = json.encoder.encode_basestring  # the C-accelerated string quoting of json.dumps


def _pretty(obj: object, level: int) -> str:
    """``json.dumps(obj, indent=4, sort_keys=True, ensure_ascii=False)`` (as kubectl indents),
    several times faster than the pure-Python encoder that ``indent`` forces."""
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        inner = "    " * (level + 1)
        body = ",\n".join(f"{inner}{_quote(k)}: {_pretty(obj[k], level + 1)}"
                          for k in sorted(obj))
        return "{\n" + body + "\n" + "    " * level + "}"
    if isinstance(obj, list):
        if not obj:
            return "[]"
        inner = "    " * (level + 1)
        body = ",\n".join(inner + _pretty(v, level + 1) for v in obj)
        return "[\n" + body + "\n" + "    " * level + "]"
    if isinstance(obj, str):
        return _quote(obj)
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if obj is None:
        return "null"
    if isinstance(obj, int):
        return str(obj)
    return json.dumps(obj)
