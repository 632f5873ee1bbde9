"""Gangs the scheduler itself knows: Kubernetes' Workload/PodGroup API and coscheduling PodGroups.

Read from a ``kubectl get workloads.scheduling.k8s.io,podgroups.scheduling.k8s.io,
podgroups.scheduling.x-k8s.io -A -o json`` List (or the same List from the API,
``pod_groups_api.py``). Each gang unit becomes one ``k8s_pod_groups`` row; an item that cannot be
read is rejected alone (its index in ``items`` as the line, the JSON path as the field).

Shapes read (docs/kubernetes.md, "Scheduler gangs"):

* ``scheduling.k8s.io/v1alpha1`` Workload (Kubernetes 1.35, KEP-4671): ``spec.podGroups[]``
  each ``{name, policy: {gang: {minCount}} | {basic: {}}}``; pods point at it through
  ``spec.workloadRef`` {name, podGroup, podGroupReplicaKey}.
* ``scheduling.k8s.io/v1alpha2`` (1.36), ``v1alpha3`` and ``v1beta1`` (1.37) Workload:
  ``spec.podGroupTemplates[]`` each ``{name, schedulingPolicy: {gang: {minCount}} | {basic}}``;
  the runtime ``PodGroup`` object carries ``spec.schedulingPolicy`` (copied from its template)
  and ``spec.podGroupTemplateRef.workload`` {workloadName, podGroupTemplateName} (v1alpha2) or
  ``spec.workloadRef`` {workloadName, templateName} (v1alpha3, v1beta1); pods point at it
  through ``spec.schedulingGroup.podGroupName``.
* ``scheduling.x-k8s.io/v1alpha1`` PodGroup (scheduler-plugins coscheduling): ``spec.minMember``;
  pods carry the label ``scheduling.x-k8s.io/pod-group: <name>``.

kube-state-metrics exports neither ``workloadRef`` nor ``schedulingGroup``, so a row says which
pods it covers the way the ledger can see them: ``job_name`` (the Job whose pods the group is:
a Workload's ``spec.controllerRef`` of kind Job, a PodGroup's controller ownerReference of kind
Job -- one Job is one PodGroup, KEP-5547) or ``pod_label`` (the coscheduling label's value). A
Workload with more than one pod group names no Job for them: which pod is in which group is in
the pod spec only.
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from connectors.errors import Reject, SourceError
from connectors.frame_types import SchemaDict
from connectors.kubernetes.workload_fields import (
    BadField,
    integer,
    join,
    obj,
    objects,
    string,
    timestamp,
)
from connectors.textfiles import open_text

REJECT_SOURCE = "k8s_pod_groups"
CORE_GROUP = "scheduling.k8s.io"  # Kubernetes' own Workload and PodGroup (KEP-4671, KEP-5832)
COSCHEDULING_GROUP = "scheduling.x-k8s.io"  # kubernetes-sigs/scheduler-plugins
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
# (group, plural, kind): every list the reader asks for, in this order
RESOURCES = (
    (CORE_GROUP, "workloads", "Workload"),
    (CORE_GROUP, "podgroups", "PodGroup"),
    (COSCHEDULING_GROUP, "podgroups", "PodGroup"),
)
POD_GROUP_SCHEMA: SchemaDict = {
    "uid": pl.String,
    "api_version": pl.String,
    "kind": pl.String,
    "namespace": pl.String,
    "name": pl.String,
    "pod_group": pl.String,
    "policy": pl.String,
    "min_count": pl.Int32,
    "job_name": pl.String,
    "pod_label": pl.String,
    "workload_name": pl.String,
    "controller_kind": pl.String,
    "controller_name": pl.String,
    "created_at": pl.Datetime("us"),
    "object_json": pl.String,
    "source_file": pl.String,
}


@dataclass(frozen=True)
class PodGroupSnapshot:
    """The gang rows of one snapshot, and the items that could not be read."""

    groups: pl.DataFrame  # POD_GROUP_SCHEMA
    rejects: list[Reject]
    listed: int  # items in the List


def _policy(parent: dict[str, Any], key: str, path: str) -> tuple[str | None, int | None]:
    """(``gang``/``basic``, minCount) of a policy object (exactly one member is set)."""
    policy = obj(parent, key, path, required=True)
    ppath = join(path, key)
    gang = obj(policy, "gang", ppath)
    if gang is not None:
        # minCount is required in v1alpha1/v1alpha2/v1beta1; a controller defaults it elsewhere
        return "gang", integer(gang, "minCount", join(ppath, "gang"), minimum=1)
    if obj(policy, "basic", ppath) is not None:
        return "basic", None
    raise BadField(ppath, "a gang or basic policy", policy)


def _job_ref(kind: str | None, group: str | None, name: str | None) -> str | None:
    return name if kind == "Job" and (group or "batch").split("/")[0] == "batch" else None


def pod_group_rows(item: object, source_file: str) -> list[dict[str, Any]]:
    """The ``k8s_pod_groups`` rows of one object (none for a kind read elsewhere)."""
    if not isinstance(item, dict):
        where = ""
        raise BadField(where, "a Workload or PodGroup object", item)
    api_version = string(item, "apiVersion", "", required=True, nonempty=True)
    kind = string(item, "kind", "", required=True, nonempty=True)
    group = api_version.split("/")[0]
    if (group, kind) not in {(g, k) for g, _, k in RESOURCES}:
        where = "kind"
        raise BadField(where, f"a Workload or PodGroup of {CORE_GROUP} or a PodGroup of "
                       f"{COSCHEDULING_GROUP}", f"{api_version} {kind}")
    meta = obj(item, "metadata", "", required=True)
    spec = obj(item, "spec", "", required=group == CORE_GROUP) or {}
    owners = objects(meta, "ownerReferences", "metadata")
    owner = next((o for o in owners if o.get("controller") is True), None)
    base = {
        "uid": string(meta, "uid", "metadata", required=True, nonempty=True),
        "api_version": api_version, "kind": kind,
        "namespace": string(meta, "namespace", "metadata", required=True, nonempty=True),
        "name": string(meta, "name", "metadata", required=True, nonempty=True),
        "pod_group": "", "policy": None, "min_count": None, "job_name": None,
        "pod_label": None, "workload_name": None,
        "controller_kind": owner.get("kind") if owner else None,
        "controller_name": owner.get("name") if owner else None,
        "created_at": timestamp(meta, "creationTimestamp", "metadata"),
        "object_json": json.dumps(item, sort_keys=True), "source_file": source_file,
    }
    if group == COSCHEDULING_GROUP:
        minimum = integer(spec, "minMember", "spec", minimum=0)
        return [{**base, "policy": "gang", "min_count": minimum or None,
                 "pod_label": base["name"]}]
    if kind == "PodGroup":
        policy, minimum = _policy(spec, "schedulingPolicy", "spec")
        ref = obj(spec, "workloadRef", "spec")  # v1alpha3, v1beta1
        template, rpath = "templateName", "spec.workloadRef"
        if ref is None:  # v1alpha2
            outer = obj(spec, "podGroupTemplateRef", "spec") or {}
            ref = obj(outer, "workload", "spec.podGroupTemplateRef")
            template, rpath = "podGroupTemplateName", "spec.podGroupTemplateRef.workload"
        ref = ref or {}
        return [{**base, "pod_group": string(ref, template, rpath) or "", "policy": policy,
                 "min_count": minimum, "workload_name": string(ref, "workloadName", rpath),
                 "job_name": _job_ref(owner.get("kind"), owner.get("apiVersion"),
                                      owner.get("name")) if owner else None}]
    controller = obj(spec, "controllerRef", "spec") or {}
    cpath = "spec.controllerRef"
    ckind = string(controller, "kind", cpath, required=bool(controller))
    cname = string(controller, "name", cpath, required=bool(controller))
    job = _job_ref(ckind, string(controller, "apiGroup", cpath), cname)
    # v1alpha1 (1.35): podGroups[].policy; v1alpha2 and later: podGroupTemplates[].schedulingPolicy
    key, policy_key = ("podGroups", "policy") if api_version == f"{CORE_GROUP}/v1alpha1" \
        else ("podGroupTemplates", "schedulingPolicy")
    groups = objects(spec, key, "spec", required=True)
    rows = []
    for i, g in enumerate(groups):
        path = join(join("spec", key), i)
        policy, minimum = _policy(g, policy_key, path)
        rows.append({**base, "pod_group": string(g, "name", path, required=True, nonempty=True),
                     "policy": policy, "min_count": minimum,
                     # pods are told apart by their spec only: one group, or no Job
                     "job_name": job if len(groups) == 1 else None,
                     "controller_kind": ckind or base["controller_kind"],
                     "controller_name": cname or base["controller_name"]})
    return rows


def read_pod_group_items(items: Iterable[object], source_file: str
                         ) -> tuple[list[dict[str, Any]], list[Reject], int]:
    rows: list[dict[str, Any]] = []
    rejects: list[Reject] = []
    seen: dict[str, int] = {}
    count = 0
    for index, item in enumerate(items):
        count += 1
        try:
            got = pod_group_rows(item, source_file)
            uid = got[0]["uid"] if got else None
            if uid in seen:
                where = "metadata.uid"
                raise BadField(where, f"a uid not already at item {seen[uid]}", uid)
        except BadField as bad:
            where = f"items[{index}]" + (f".{bad.path}" if bad.path else "")
            rejects.append(Reject(REJECT_SOURCE, source_file, index, where, bad.reason,
                                  json.dumps(item, sort_keys=True)[:2000]))
            continue
        if uid is not None:
            seen[uid] = index
        rows.extend(got)
    return rows, rejects, count


def pod_group_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=POD_GROUP_SCHEMA, orient="row")


def read_pod_group_snapshot(path: Path) -> PodGroupSnapshot:
    """Every Workload/PodGroup item of a kubectl List file; bad items are rejected one by one."""
    try:
        with open_text(path) as fh:
            doc = json.load(fh)
    except FileNotFoundError as exc:
        msg = f"expected a Workload/PodGroup snapshot at {path}, found none"
        raise SourceError(msg) from exc
    except json.JSONDecodeError as exc:
        msg = f"{path}:{exc.lineno}: expected JSON from kubectl -o json, found {exc.msg}"
        raise SourceError(msg) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
        msg = (f"{path}: expected a kubectl List with an 'items' array, found "
               f"{type(doc).__name__}")
        raise SourceError(msg)
    rows, rejects, listed = read_pod_group_items(doc["items"], str(path))
    return PodGroupSnapshot(pod_group_frame(rows), rejects, listed)
