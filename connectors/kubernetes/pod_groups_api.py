"""The scheduler's gang objects straight from the Kubernetes API (``KubeApiClient.get_json``).

For each resource of ``pod_groups.RESOURCES`` (``workloads`` and ``podgroups`` of
``scheduling.k8s.io``, ``podgroups`` of ``scheduling.x-k8s.io``): discovery names the versions
the server serves (``/apis/<group>``, preferred first) and which of them hold the resource
(``/apis/<group>/<version>``); the first that does is listed page by page (``limit`` /
``continue``; an expired token, 410, restarts the list). ``scheduling.k8s.io/v1`` serves only
PriorityClasses, so the group's preferred version alone would not do. A group the server does
not serve (404: a cluster before 1.35, or without the alpha API or the coscheduling CRD) lists
nothing and says so in ``missing``; any other error is raised.

The answer is one kubectl-style List with ``apiVersion``/``kind`` set on every item, the same
document ``kubectl get workloads.scheduling.k8s.io,podgroups.scheduling.k8s.io,
podgroups.scheduling.x-k8s.io -A -o json`` writes: its fixture twin.
"""

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from connectors.kubernetes.kube_api import ApiError, KubeApiClient, list_all
from connectors.kubernetes.pod_groups import RESOURCES

# newest first: the versions to try when discovery is forbidden (403)
KNOWN_VERSIONS = {"scheduling.k8s.io": ("v1beta1", "v1alpha3", "v1alpha2", "v1alpha1"),
                  "scheduling.x-k8s.io": ("v1alpha1",)}


@dataclass(frozen=True)
class PodGroupList:
    observed_at: datetime  # naive UTC: when the first list was asked for
    items: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    versions: dict[str, str] = field(default_factory=dict)  # "group/plural" -> version listed
    missing: tuple[str, ...] = ()  # "group/plural" the server does not serve

    def document(self) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                "items": list(self.items)}


def _versions(client: KubeApiClient, group: str, plural: str) -> list[str]:
    """The versions of ``group`` that serve ``plural``, the server's preference first."""
    try:
        doc = client.get_json(f"/apis/{group}")
    except ApiError as exc:
        if exc.status == 404:
            return []
        if exc.status != 403:
            raise
        return list(KNOWN_VERSIONS.get(group, ()))  # discovery forbidden: try them in turn
    entries = doc.get("versions") or []
    preferred = (doc.get("preferredVersion") or {}).get("version")
    names = [e.get("version") for e in entries if isinstance(e, dict)]
    ordered = [v for v in (preferred, *names) if isinstance(v, str) and v]
    serving = []
    for version in dict.fromkeys(ordered):
        try:
            resources = client.get_json(f"/apis/{group}/{version}").get("resources") or []
        except ApiError as exc:
            if exc.status in (403, 404):
                serving.append(version)  # cannot tell: the list will say
                continue
            raise
        if any(isinstance(r, dict) and r.get("name") == plural for r in resources):
            serving.append(version)
    return serving




def list_pod_groups(client: KubeApiClient, namespace: str = "") -> PodGroupList:
    """Every scheduling Workload and PodGroup the server serves (of ``namespace``, or all)."""
    observed = datetime.now(UTC).replace(tzinfo=None)
    items: list[dict[str, Any]] = []
    versions: dict[str, str] = {}
    missing: list[str] = []
    for group, plural, kind in RESOURCES:
        name = f"{group}/{plural}"
        for version in _versions(client, group, plural):
            try:
                items += list_all(client, group, version, plural, kind, namespace).items
            except ApiError as exc:
                if exc.status == 404:
                    continue
                raise
            versions[name] = version
            break
        else:
            missing.append(name)
    return PodGroupList(observed, tuple(items), versions, tuple(missing))
