"""Read a ``kubectl get workloads.kueue.x-k8s.io -A -o json`` snapshot.

Each item becomes one row of two frames: the raw object (identity, queue, pod-set sizes and the
whole object as JSON, ``kueue_workloads_raw``) and its conditions read
(``connectors/kubernetes/workload_conditions.py``, ``kueue_workloads``). An item that cannot be
read (null, missing or wrongly typed fields) is rejected alone, with its index in ``items`` as
the line and the JSON path as the field; the other items load. A file that is not JSON or not a
kubectl List is refused whole (``SourceError``).
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from connectors.errors import Reject, SourceError
from connectors.frame_types import SchemaDict
from connectors.kubernetes.workload_conditions import (
    DEFAULT_GPU_RESOURCES,
    workload_frame,
    workload_row,
)
from connectors.kubernetes.workload_fields import BadField
from connectors.textfiles import open_text

REJECT_SOURCE = "kueue_workloads"
WORKLOAD_SCHEMA: SchemaDict = {
    "uid": pl.String,
    "namespace": pl.String,
    "name": pl.String,
    "queue_name": pl.String,
    "cluster_queue": pl.String,
    "created_at": pl.Datetime("us"),
    "pod_sets": pl.Int32,
    "pods_wanted": pl.Int32,
    "object_json": pl.String,
    "source_file": pl.String,
}


@dataclass(frozen=True)
class WorkloadSnapshot:
    """The items of one snapshot that could be read, and the ones that could not."""

    raw: pl.DataFrame  # WORKLOAD_SCHEMA
    workloads: pl.DataFrame  # workload_conditions.WORKLOAD_TYPES
    rejects: list[Reject]


def check_kubectl_list(doc: object, origin: str) -> dict[str, Any]:
    """The document if it is a kubectl List (``{"items": [...]}``), else a ``SourceError``."""
    if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
        msg = f"{origin}: expected a kubectl List with an 'items' array, found {type(doc).__name__}"
        raise SourceError(msg)
    return doc


def read_workload_snapshot(
    path: Path, *, gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES
) -> WorkloadSnapshot:
    """Read every Workload item of ``path``; bad items are rejected one by one."""
    try:
        with open_text(path) as fh:
            doc = json.load(fh)
    except FileNotFoundError as exc:
        msg = f"expected a Workload snapshot at {path}, found none"
        raise SourceError(msg) from exc
    except json.JSONDecodeError as exc:
        msg = f"{path}:{exc.lineno}: expected JSON from kubectl -o json, found {exc.msg}"
        raise SourceError(msg) from exc
    check_kubectl_list(doc, str(path))
    raw_rows: list[dict[str, object]] = []
    rows: list[dict[str, Any]] = []
    rejects: list[Reject] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(doc["items"]):
        try:
            row = workload_row(item, str(path), tuple(gpu_resources))
            if row["uid"] in seen:  # a List from one API server never repeats a uid
                where = "metadata.uid"
                raise BadField(where, f"a uid not already at item {seen[row['uid']]}",
                               row["uid"])
        except BadField as bad:
            where = f"items[{index}]" + (f".{bad.path}" if bad.path else "")
            rejects.append(Reject(REJECT_SOURCE, str(path), index, where, bad.reason,
                                  json.dumps(item, sort_keys=True)[:2000]))
            continue
        seen[row["uid"]] = index
        rows.append(row)
        raw_rows.append({
            "uid": row["uid"], "namespace": row["namespace"], "name": row["name"],
            "queue_name": row["queue_name"] or "", "cluster_queue": row["cluster_queue"] or "",
            "created_at": row["created_at"], "pod_sets": row["pod_sets"],
            "pods_wanted": row["pods_wanted"], "object_json": json.dumps(item, sort_keys=True),
            "source_file": str(path),
        })
    return WorkloadSnapshot(pl.DataFrame(raw_rows, schema=WORKLOAD_SCHEMA),
                            workload_frame(rows), rejects)
