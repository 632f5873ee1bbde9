"""Groups for the streamed Kubernetes ingest (k8s_dcgm_stream, k8s_ksm_stream): members (GPUs
or pods) that share a node stay in one group, since metric choice and attribution are per node;
the node components are packed, in a fixed order, into groups of at least ``size`` members."""

from collections.abc import Iterable


def grouped_by_node(links: Iterable[tuple[str, str | None]], members: Iterable[str], size: int,
                    *, member_tag: str) -> list[list[str]]:
    """``links``: (member, node or None) pairs; ``members``: every member, in the order kept
    inside a group. ``member_tag`` orders the components against node roots (union-find)."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x: tuple[str, str]) -> tuple[str, str]:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for member, node in links:
        a = find((member_tag, member))
        if node is not None:
            b = find(("n", node))
            if a != b:
                parent[max(a, b)] = min(a, b)
    components: dict[tuple[str, str], list[str]] = {}
    for member in members:
        components.setdefault(find((member_tag, member)), []).append(member)
    groups: list[list[str]] = []
    current: list[str] = []
    for root in sorted(components):
        current.extend(components[root])
        if len(current) >= size:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups
