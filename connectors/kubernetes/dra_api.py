"""ResourceClaims straight from the Kubernetes API, with the project's API client
(``kube_api.KubeApiClient``: the kubeconfig context, TLS, tokens, retries).

``list_resource_claims`` asks ``/apis/resource.k8s.io`` for the preferred version (``v1`` since
Kubernetes 1.34, where DRA is GA; ``v1beta2``/``v1beta1`` before: the fields read are the same
but for ``deviceClassName``, which ``dra_claims`` reads in both places), then lists every
ResourceClaim (of a namespace, or of all) page by page (``limit``/``continue``; an expired
continue token, 410, restarts the list). Its answer is a ``kubectl get resourceclaims -A -o
json`` document, the fixture twin, read by ``dra_claims.read_claim_document``.

Pods are not listed (a cluster's pods are many): a pod's claims come from the claims'
``reservedFor`` and owner, kube-state-metrics' ``kube_pod_resourceclaim_info`` and
dcgm-exporter's labels; a ``kubectl get pods -A -o json`` snapshot may add its
``status.extendedResourceClaimStatus``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from connectors.errors import SourceError
from connectors.kubernetes.kube_api import ApiError, KubeApiClient, list_all

GROUP = "resource.k8s.io"
KNOWN_VERSIONS = ("v1", "v1beta2", "v1beta1")  # newest first


@dataclass(frozen=True)
class ClaimList:
    """Every ResourceClaim the API server listed at one instant."""

    api_version: str  # resource.k8s.io/v1
    resource_version: str
    observed_at: datetime  # naive UTC: when the first page was asked for
    items: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    pages: int = 1
    slices_refused: str = ""  # why the ResourceSlices could not be listed ("" when they were)

    def document(self) -> dict[str, Any]:
        """The list as ``kubectl get resourceclaims -A -o json`` writes it (a ``v1`` List)."""
        return {"apiVersion": "v1", "kind": "List",
                "metadata": {"resourceVersion": self.resource_version},
                "items": list(self.items)}


def resource_version(client: KubeApiClient) -> str:
    """The version of resource.k8s.io the server prefers; "" when discovery is forbidden."""
    try:
        group = client.get_json(f"/apis/{GROUP}")
    except ApiError as exc:
        if exc.status == 404:
            msg = (f"{client.creds.server}: expected the API group {GROUP} (Kubernetes 1.32+ "
                   f"with DRA), found 404 at /apis/{GROUP}")
            raise SourceError(msg) from exc
        if exc.status != 403:
            raise
        return ""
    version = (group.get("preferredVersion") or {}).get("version")
    if not isinstance(version, str) or not version:
        msg = f"/apis/{GROUP}: expected preferredVersion.version, found {group!r:.200}"
        raise SourceError(msg)
    return version


def list_resource_claims(client: KubeApiClient, namespace: str = "") -> ClaimList:
    """Every ResourceClaim (of ``namespace``, or of all), page by page."""
    preferred = resource_version(client)
    versions = (preferred,) if preferred else KNOWN_VERSIONS
    for version in versions[:-1]:
        try:
            return _list(client, version, namespace)
        except ApiError as exc:
            if exc.status != 404:
                raise
    return _list(client, versions[-1], namespace)


def _list(client: KubeApiClient, version: str, namespace: str) -> ClaimList:
    listed = list_all(client, GROUP, version, "resourceclaims", "ResourceClaim", namespace)
    slices, refused = _slices(client, version)
    return ClaimList(f"{GROUP}/{version}", listed.resource_version, listed.observed_at,
                     listed.items + slices, listed.pages, refused)


def _slices(client: KubeApiClient, version: str) -> tuple[tuple[dict[str, Any], ...], str]:
    """The drivers' ResourceSlices (cluster-scoped): which GPU each device name is. A server
    that refuses them (RBAC) gives none and says so; the claims are read all the same."""
    try:
        return list_all(client, GROUP, version, "resourceslices", "ResourceSlice", "").items, ""
    except ApiError as exc:
        if exc.status not in (403, 404):
            raise
        return (), (f"{client.creds.server}: expected to list {GROUP}/{version} resourceslices "
                    f"(which GPU UUID and MIG profile each DRA device name is), found HTTP "
                    f"{exc.status}: DRA devices are placed by dcgm-exporter's labels alone; "
                    "grant list on resourceslices")
