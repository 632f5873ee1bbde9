"""``gpuledger doctor``: a cluster's Kueue Workloads, through the API or a snapshot file.

API: the kubeconfig reads and has the context (``connectors.kubernetes.kube_api``, the same
reader the Workload history sensor uses), the API server answers and serves Kueue's API group.
Snapshot: the file (or folder of timed snapshots) reads as a kubectl List of Workloads; a few
Workloads are printed.
"""

from collections.abc import Iterator
from pathlib import Path

from connectors.errors import SourceError
from connectors.kubernetes.kube_api import (
    ApiError,
    ApiSettings,
    KubeApiClient,
    read_kubeconfig,
    snapshot_files,
)
from connectors.kubernetes.workload_snapshot import read_workload_snapshot
from gpuledger.doctor.checks import SAMPLE_SIZE, Check, describe_reject, fail, first_line, ok, warn
from gpuledger.site import KueueSite


def kueue_checks(name: str, k: KueueSite) -> Iterator[Check]:
    where = f"[gpuledger.clusters.{name}.kueue]"
    label = f"kueue {name}"
    if k.kubeconfig is not None:
        yield from _api_checks(label, k, where)
    if k.snapshot is not None:
        yield _snapshot_check(label, Path(k.snapshot), where)


def _api_checks(label: str, k: KueueSite, where: str) -> Iterator[Check]:
    try:
        creds = read_kubeconfig(Path(k.kubeconfig), k.context)  # type: ignore[arg-type]
    except SourceError as exc:
        yield fail(f"{label}: kubeconfig", f"a readable kubeconfig with the context "
                   f"{k.context or '(its current-context)'}", first_line(exc),
                   f"point {where}.kubeconfig at the file and set {where}.context to one of "
                   "its contexts (`kubectl config get-contexts`)")
        return
    yield ok(f"{label}: kubeconfig", f"{k.kubeconfig}: context {creds.context} -> "
             f"{creds.server}")
    client = KubeApiClient(creds, ApiSettings(timeout_s=min(k.timeout_s, 30.0), retries=0))
    try:
        version = client.kueue_version()
    except ApiError as exc:
        hint = ("give the service account get/list on workloads.kueue.x-k8s.io"
                if exc.status in (401, 403) else "check the server and that Kueue is installed")
        yield fail(f"{label}: API", f"the API server to serve {creds.server}/apis/kueue.x-k8s.io",
                   f"HTTP {exc.status}", hint)
        return
    except SourceError as exc:
        yield fail(f"{label}: API", f"an answer from {creds.server}", first_line(exc),
                   f"check that this host reaches the API server, and the context's "
                   f"certificate authority in {k.kubeconfig}")
        return
    yield ok(f"{label}: API", f"{creds.server} serves kueue.x-k8s.io "
             f"{version or '(discovery forbidden: the known versions are tried)'}")


def _snapshot_check(label: str, path: Path, where: str) -> Check:
    what = f"{label}: snapshot"
    try:
        if path.is_dir():
            taken = snapshot_files(path)
            if not taken:
                return fail(what, f"Workload snapshots (workloads-<UTC time>.json) in {path}",
                            "none", f"point {where}.snapshot at a kubectl JSON file or folder")
            shown, latest = f"{path}: {len(taken)} snapshot(s), latest {taken[-1][1].name}", \
                taken[-1][1]
        else:
            shown, latest = str(path), path
        snap = read_workload_snapshot(latest)
    except (SourceError, OSError, ValueError) as exc:
        return fail(what, f"a kubectl List of Workloads at {path}", first_line(exc),
                    f"write it with `kubectl get workloads.kueue.x-k8s.io -A -o json`, or point "
                    f"{where}.snapshot at it")
    raw = snap.raw
    samples = [f"workload {r['namespace']}/{r['name']} queue {r['queue_name'] or '?'} "
               f"({r['cluster_queue'] or 'not admitted'}): {r['pods_wanted']} pod(s)"
               for r in raw.head(SAMPLE_SIZE).iter_rows(named=True)]
    detail = f"{shown}: {raw.height} Workload(s), {len(snap.rejects)} rejected"
    if snap.rejects:
        return warn(what, f"{detail}; first: {describe_reject(snap.rejects[0])}", samples)
    return ok(what, detail, samples)
