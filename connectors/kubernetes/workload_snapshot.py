"""Read a ``kubectl get workloads.kueue.x-k8s.io -A -o json`` snapshot.

This keeps one row per Workload with its identity, queue and pod-set sizes plus the whole object
as JSON; the detailed reading of conditions belongs to the Kueue ingest.
"""

import json
from datetime import datetime
from pathlib import Path

import polars as pl

from connectors.errors import Reject, SourceError
from connectors.textfiles import open_text

WORKLOAD_SCHEMA = {
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


def _timestamp(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


def check_kubectl_list(doc: object, origin: str) -> dict:
    """The document if it is a kubectl List (``{"items": [...]}``), else a ``SourceError``."""
    if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
        msg = f"{origin}: expected a kubectl List with an 'items' array, found {type(doc).__name__}"
        raise SourceError(msg)
    return doc


def read_workload_snapshot(path: Path) -> tuple[pl.DataFrame, list[Reject]]:
    """Return one row per Workload item; items without a uid are rejected with their index."""
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
    rows: list[dict[str, object]] = []
    rejects: list[Reject] = []
    for index, item in enumerate(doc["items"]):
        meta = item.get("metadata", {}) if isinstance(item, dict) else {}
        uid = meta.get("uid")
        if not uid:
            rejects.append(
                Reject("kueue_workloads", str(path), index, "metadata.uid",
                       "expected a Workload uid, found none", json.dumps(item)[:2000])
            )
            continue
        spec = item.get("spec", {})
        status = item.get("status", {})
        pod_sets = spec.get("podSets", [])
        rows.append(
            {
                "uid": uid,
                "namespace": meta.get("namespace", ""),
                "name": meta.get("name", ""),
                "queue_name": spec.get("queueName", ""),
                "cluster_queue": (status.get("admission") or {}).get("clusterQueue", ""),
                "created_at": _timestamp(meta.get("creationTimestamp")),
                "pod_sets": len(pod_sets),
                "pods_wanted": sum(int(ps.get("count", 0)) for ps in pod_sets),
                "object_json": json.dumps(item, sort_keys=True),
                "source_file": str(path),
            }
        )
    return pl.DataFrame(rows, schema=WORKLOAD_SCHEMA), rejects
