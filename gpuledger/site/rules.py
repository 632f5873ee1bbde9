"""The site file's accounting rules: the GPU sharing names (``[gpuledger.sharing]``), the
data-quality gate's thresholds (``[gpuledger.quality]``) and the idle policies
(``[gpuledger.idle]``, per cluster or pool)."""

from typing import TYPE_CHECKING

from connectors.gpu_sharing import SharingNames
from gpuledger.site.table import SiteTable
from models.quality import QualityThresholds

if TYPE_CHECKING:
    from gpuledger.site import ClusterSite
    from models.incidents import IdleRules


def parse_sharing(t: SiteTable | None) -> SharingNames:
    """``[gpuledger.sharing]``: resource names in kube-state-metrics' spelling
    (``nvidia_com_gpu_shared``); a name in both lists, or a whole-GPU/MIG name, is an error."""
    d = SharingNames()
    if t is None:
        return d
    lists = {}
    for key in ("time_slicing_resources", "mps_resources"):
        value = t.get(key, list, list(getattr(d, key)),
                      "a list of kube-state-metrics resource names (nvidia_com_gpu_shared)")
        if not all(isinstance(v, str) and v and v == v.strip() for v in value):  # type: ignore
            t.fail(key, "a list of kube-state-metrics resource names (nvidia_com_gpu_shared)",
                   value)
        for v in value:  # type: ignore[union-attr]
            if "." in v or "/" in v:
                t.fail(key, "names as kube-state-metrics writes them (nvidia_com_gpu_shared, "
                       "every '.', '/' and '-' an '_')", v)
            if v == "nvidia_com_gpu" or v.startswith("nvidia_com_mig_"):
                t.fail(key, "a replica resource, not nvidia_com_gpu or a MIG profile (their "
                       "meaning comes from the node labels and the name)", v)
        lists[key] = tuple(dict.fromkeys(value))  # type: ignore[arg-type]
    both = sorted(set(lists["time_slicing_resources"]) & set(lists["mps_resources"]))
    if both:
        t.fail("mps_resources", "names not also in time_slicing_resources", both)
    t.done()
    return SharingNames(**lists)


def parse_quality(t: SiteTable | None) -> QualityThresholds:
    if t is None:
        return QualityThresholds()
    d = QualityThresholds()
    shares = {k: t.number(k, getattr(d, k)) for k in
              ("min_sample_coverage", "min_attributed_share", "max_sreport_difference")}
    for key, value in shares.items():
        if value > 1:
            t.fail(key, "a share between 0 and 1", value)
    # warnings are routine (pod starts kept on the scrape grid): gated only when a limit is set
    warnings = t.number("max_k8s_warnings", 0.0) if "max_k8s_warnings" in t.data else None
    # shown always, gated only when set: it questions the detectors, not what an invoice charges
    unverified = (t.number("max_unverified_overlap_gpu_hours", 0.0)
                  if "max_unverified_overlap_gpu_hours" in t.data else None)
    site = QualityThresholds(
        **shares, max_scrape_gap_minutes=t.number("max_scrape_gap_minutes",
                                                  d.max_scrape_gap_minutes),
        max_unknown_nodes=t.number("max_unknown_nodes", d.max_unknown_nodes),
        max_k8s_rejects=t.number("max_k8s_rejects", d.max_k8s_rejects),
        max_k8s_warnings=warnings, max_unverified_overlap_gpu_hours=unverified,
    )
    t.seen.update(("max_k8s_warnings", "max_unverified_overlap_gpu_hours"))
    t.done()
    return site


IDLE_RULE_KEYS = ("zero_threshold", "zero_minutes", "window_threshold", "window_minutes",
                  "efficiency_threshold", "efficiency_minutes")


def _idle_rules(t: SiteTable, base: object) -> dict[str, float]:
    """The rule keys of one idle table, over ``base`` (an IdlePolicy)."""
    out: dict[str, float] = {}
    for key in IDLE_RULE_KEYS:
        attr = "efficiency_min_minutes" if key == "efficiency_minutes" else key
        value = t.number(key, getattr(base, attr))
        if key.endswith("_threshold") and value > 1:
            t.fail(key, "a busy fraction between 0 and 1 (0.05 is 5 %)", value)
        if key in ("zero_threshold", "window_threshold", "zero_minutes") and value <= 0:
            t.fail(key, "a number above 0", value)
        out[attr] = value
    return out


def parse_idle(t: SiteTable | None,
               clusters: "tuple[ClusterSite, ...]") -> "IdleRules | None":
    if t is None:
        return None
    from models.incidents import IdlePolicy, IdleRules
    default = IdlePolicy(**_idle_rules(t, IdlePolicy()))
    entries = t.get("policy", list, [], "a list of [[gpuledger.idle.policy]] tables")
    names = [c.name for c in clusters]
    policies = []
    for i, entry in enumerate(entries):  # type: ignore[union-attr]
        e = SiteTable(t.path, f"{t.where}.policy[{i}]", entry)
        cluster, partition, namespace = e.text("cluster"), e.text("partition"), e.text("namespace")
        if cluster and cluster not in names:
            e.fail("cluster", f"one of the site's clusters {names}", cluster)
        if partition and namespace:
            e.fail("namespace", "a partition (Slurm) or a namespace (Kubernetes), not both",
                   {"partition": partition, "namespace": namespace})
        if not (cluster or partition or namespace):
            e.fail("cluster", "at least one of cluster, partition and namespace to match "
                   "(the defaults are [gpuledger.idle] itself)", None)
        policies.append(IdlePolicy(cluster=cluster, partition=partition, namespace=namespace,
                                   **_idle_rules(e, default)))
        e.done()
    t.done()
    return IdleRules(default, tuple(policies))
