"""Kueue Workload objects from the Kubernetes API, through ``kubectl`` and a kubeconfig.

The snapshot file (``kubectl get workloads.kueue.x-k8s.io -A -o json``) is the fixture twin of
this source: both yield the same JSON document, which is kept as a file so every figure derived
from it can be traced to what the API said.
"""

import json
from datetime import UTC, datetime
from pathlib import Path

from connectors.errors import SourceError
from connectors.kubernetes.workload_snapshot import check_kubectl_list
from connectors.slurm.commands import CommandRunner

WORKLOADS_RESOURCE = "workloads.kueue.x-k8s.io"


def kubectl_command(kubeconfig: Path, context: str | None = None) -> list[str]:
    """The read-only kubectl call that lists every Workload in every namespace."""
    command = ["kubectl", f"--kubeconfig={kubeconfig}"]
    if context:
        command.append(f"--context={context}")
    return [*command, "get", WORKLOADS_RESOURCE, "--all-namespaces", "--output=json"]


def fetch_workload_snapshot(
    kubeconfig: Path,
    dest_dir: Path,
    *,
    context: str | None = None,
    runner: CommandRunner | None = None,
    now: datetime | None = None,
) -> Path:
    """Ask the API server for all Workloads and write the answer to ``dest_dir``; returns the file.

    Raises ``SourceError`` (naming the command and its stderr) when kubectl fails or answers
    something other than a kubectl List.
    """
    if not kubeconfig.is_file():
        msg = f"expected a kubeconfig at {kubeconfig}, found none"
        raise SourceError(msg)
    text = (runner or CommandRunner(timeout_s=120)).run(kubectl_command(kubeconfig, context), {})
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"expected JSON from kubectl get {WORKLOADS_RESOURCE}, found: {text[:200]!r}"
        raise SourceError(msg) from exc
    check_kubectl_list(doc, f"kubectl get {WORKLOADS_RESOURCE}")
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    dest_dir.mkdir(parents=True, exist_ok=True)
    path = dest_dir / f"workloads-{stamp}.json"
    path.write_text(text, encoding="utf-8")
    return path
