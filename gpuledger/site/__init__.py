"""The site file: one TOML document that describes a whole estate (``docs/site-file.md``).

``load_site(path)`` reads and validates it. Every problem is a ``SiteError`` that names the file
and the key, "expected …, found …". Relative paths are taken from the site file's folder, so a
site folder can be moved whole. The CLI and Dagster both start from the same ``Site``.
"""

import os
import tomllib
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from connectors.gpu_sharing import SharingNames
from gpuledger.site.dra import DraClusterSite, DraSite, parse_cluster_dra, parse_dra
from gpuledger.site.engine import EngineSite, parse_engine
from gpuledger.site.rules import parse_idle, parse_quality, parse_sharing
from gpuledger.site.table import DEFAULT_CONFIG, DEFAULT_GPU_RESOURCES, SiteError, SiteTable
from models.quality import QualityThresholds

if TYPE_CHECKING:
    from gpuledger.export.focus import FocusSite
    from gpuledger.site.alerts import AlertsSite
    from models.incidents import IdleRules

SLURM_MODES = ("sacct", "dump")
CLUSTER_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
# kube_namespace_labels label keys that name an owner, by identity field (defaults)
DEFAULT_NAMESPACE_LABELS = {"person": "owner", "team": "team", "cost_centre": "cost-centre"}


@dataclass(frozen=True)
class SlurmSite:
    """Where a cluster's Slurm accounting comes from.

    ``mode="sacct"``: the commands run live (``prefix`` such as ``ssh login-node`` in front of
    each of sacct, sreport, scontrol, sacctmgr). ``mode="dump"``: exported files.
    """

    mode: str = "sacct"
    prefix: str = ""
    sacct: str = "sacct"
    timeout_s: float = 300.0
    lookback_hours: float = 48.0
    sreport: bool = True
    # `scontrol show job -d` snapshots: minutes between two (0: none taken)
    scontrol_every_minutes: float = 0.0
    # dump mode
    dump: Path | None = None
    dump_timezone: str = "UTC"
    dump_as_of: datetime | None = None  # naive UTC: when the dump was taken
    sreport_utilization: Path | None = None
    sreport_accounts: Path | None = None
    scontrol_snapshots: Path | None = None  # folder of scontrol-YYYYmmddTHHMMSSZ.txt
    scontrol_nodes: Path | None = None  # `scontrol -o show node` output (GPUs, Slinky pods)
    limits: dict[str, float] = field(default_factory=dict)  # [slurm_limits] keys


@dataclass(frozen=True)
class PrometheusSite:
    """A Prometheus-compatible API (Prometheus, Thanos, Mimir …) or, for a fixture, an
    OpenMetrics file (``openmetrics``)."""

    url: str = ""
    # added to every selector, for a server that holds several clusters: 'cluster="a"'
    selector: str = ""
    bearer_token_file: Path | None = None
    basic_auth_user: str = ""
    basic_auth_password_file: Path | None = None
    ca_bundle: Path | None = None
    insecure: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 120.0
    connect_timeout_s: float = 10.0
    window_budget_s: float = 1800.0
    retries: int = 3
    lookback_minutes: float = 60.0
    scrape_interval_s: float = 0.0  # 0: inferred from the data
    openmetrics: Path | None = None


@dataclass(frozen=True)
class KueueSite:
    """Kueue Workloads through the Kubernetes API (``kubeconfig``/``context``), or a kubectl
    JSON snapshot file (``snapshot``) for a site without API access."""

    kubeconfig: Path | None = None
    context: str = ""
    namespace: str = ""  # empty: all namespaces
    every_minutes: float = 5.0  # the Workload history sensor's interval
    timeout_s: float = 30.0
    snapshot: Path | None = None
    # the scheduler's gang objects (Workload API, coscheduling PodGroups): a kubectl JSON file
    # or a folder of time-named ones; without it they are listed through the kubeconfig
    pod_groups: Path | None = None


@dataclass(frozen=True)
class ClusterSite:
    name: str
    slurm: SlurmSite | None = None
    prometheus: PrometheusSite | None = None
    kueue: KueueSite | None = None
    # raw node name as a source prints it -> canonical name (gpuledger/ingest/nodenames.py)
    node_aliases: dict[str, str] = field(default_factory=dict)
    # [dra]: where the cluster's DRA ResourceClaims come from (gpuledger/site/dra.py)
    dra: DraClusterSite | None = None


@dataclass(frozen=True)
class ReferenceSite:
    """Reference files; each overrides what the sources say (nodes, accounts) or is the only
    source (identity map, rate card)."""

    nodes: Path | None = None
    accounts: Path | None = None
    identity_map: Path | None = None
    rate_card: Path | None = None
    # identity field -> kube_namespace_labels label key naming it
    namespace_labels: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_NAMESPACE_LABELS))


@dataclass(frozen=True)
class ScheduleSite:
    enabled: bool = True  # schedules and sensors RUNNING by default in a site deployment
    daily: str = "0 1 * * *"
    weekly: str = "0 6 * * 1"
    timezone: str = "UTC"


@dataclass(frozen=True)
class Site:
    path: Path
    first_day: date
    db: Path = Path("data/gpuledger.duckdb")
    reports_dir: Path = Path("reports")
    gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES
    clusters: tuple[ClusterSite, ...] = ()
    reference: ReferenceSite = field(default_factory=ReferenceSite)
    schedules: ScheduleSite = field(default_factory=ScheduleSite)
    quality: QualityThresholds = field(default_factory=QualityThresholds)
    # [gpuledger.sharing]: Kubernetes resources (KSM spelling) that are replicas of a GPU
    sharing: SharingNames = field(default_factory=SharingNames)
    # [gpuledger.idle] and its [[gpuledger.idle.policy]] entries; None: the detectors' defaults
    idle: "IdleRules | None" = None
    # [gpuledger.alerts] (gpuledger/site/alerts.py; docs/alerts.md); None: no table
    alerts: "AlertsSite | None" = None
    # [gpuledger.focus] (gpuledger/export/focus.py; docs/focus.md): FOCUS export names
    focus: "FocusSite | None" = None
    # [gpuledger.engine] (gpuledger/site/engine.py; docs/spark.md): DuckDB or a Spark cluster
    engine: EngineSite = field(default_factory=EngineSite)
    # [gpuledger.dra] (gpuledger/site/dra.py): the DRA drivers and device classes that are GPUs
    dra: DraSite = field(default_factory=DraSite)

    def cluster(self, name: str) -> ClusterSite:
        for c in self.clusters:
            if c.name == name:
                return c
        msg = (f"{self.path}: expected a cluster named {name!r}, found "
               f"{[c.name for c in self.clusters]}")
        raise SiteError(msg)

    @property
    def node_aliases(self) -> dict[str, str]:
        """Every cluster's aliases in one table (node names are unique across a site)."""
        merged: dict[str, str] = {}
        for c in self.clusters:
            merged.update(c.node_aliases)
        return merged


def site_file(explicit: Path | str | None = None) -> Path | None:
    """The site file in use: ``explicit``, else ``GPULEDGER_CONFIG``, else ``./gpuledger.toml``
    when it exists; ``None`` when there is none."""
    if explicit:
        return Path(explicit)
    if os.environ.get("GPULEDGER_CONFIG"):
        return Path(os.environ["GPULEDGER_CONFIG"])
    return DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None


def _instant(t: SiteTable, key: str) -> datetime | None:
    t.seen.add(key)
    value = t.data.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            t.fail(key, "an ISO 8601 time such as 2026-01-12T00:00:00Z", value)
    else:
        t.fail(key, "an ISO 8601 time such as 2026-01-12T00:00:00Z", value)
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


def _slurm(t: SiteTable) -> SlurmSite:
    mode = t.text("mode", "sacct")
    if mode not in SLURM_MODES:
        t.fail("mode", f"one of {list(SLURM_MODES)}", mode)
    limits_table = t.get("limits", dict, {}, "a table of limits (max_gpus_per_node = 64, …)")
    site = SlurmSite(
        mode=mode, prefix=t.text("prefix"), sacct=t.text("sacct", "sacct") or "sacct",
        timeout_s=t.number("timeout_s", 300.0, minimum=1.0),
        lookback_hours=t.number("lookback_hours", 48.0),
        sreport=t.flag("sreport", True),
        scontrol_every_minutes=t.number("scontrol_every_minutes", 0.0),
        dump=t.file("dump"), dump_timezone=t.text("dump_timezone", "UTC") or "UTC",
        dump_as_of=_instant(t, "dump_as_of"),
        sreport_utilization=t.file("sreport_utilization"),
        sreport_accounts=t.file("sreport_accounts"),
        scontrol_snapshots=t.file("scontrol_snapshots"),
        scontrol_nodes=t.file("scontrol_nodes"),
        limits=dict(limits_table),  # type: ignore[arg-type]
    )
    if mode == "dump" and site.dump is None:
        t.fail("dump", "the path of a sacct dump file when mode = \"dump\"", None)
    try:  # the limits' own validation ("expected …, found …")
        from connectors.slurm.sanity import SanityLimits
        SanityLimits.from_config(site.limits)
    except ValueError as exc:
        msg = f"{t.path}: [{t.where}.limits]: {exc}"
        raise SiteError(msg) from None
    t.done()
    return site


def _prometheus(t: SiteTable) -> PrometheusSite:
    site = PrometheusSite(
        url=t.text("url").rstrip("/"), selector=t.text("selector").strip(),
        bearer_token_file=t.file("bearer_token_file"),
        basic_auth_user=t.text("basic_auth_user"),
        basic_auth_password_file=t.file("basic_auth_password_file"),
        ca_bundle=t.file("ca_bundle"), insecure=t.flag("insecure", False),
        headers=t.strings("headers", "a table of header = \"value\""),
        timeout_s=t.number("timeout_s", 120.0, minimum=1.0),
        connect_timeout_s=t.number("connect_timeout_s", 10.0, minimum=0.1),
        window_budget_s=t.number("window_budget_s", 1800.0, minimum=1.0),
        retries=int(t.number("retries", 3)),
        lookback_minutes=t.number("lookback_minutes", 60.0),
        scrape_interval_s=t.number("scrape_interval_s", 0.0),
        openmetrics=t.file("openmetrics"),
    )
    if bool(site.url) == bool(site.openmetrics):
        t.fail("url", "exactly one of url (a live server) and openmetrics (a file)",
               {"url": site.url, "openmetrics": str(site.openmetrics or "")})
    if site.url and not site.url.startswith(("http://", "https://")):
        t.fail("url", "an http:// or https:// URL", site.url)
    from connectors.kubernetes.promql_selectors import check_matchers  # what the client adds
    try:
        check_matchers(site.selector)
    except ValueError:
        t.fail("selector", "label matchers without braces, such as cluster=\"a\"", site.selector)
    t.done()
    return site


def _kueue(t: SiteTable) -> KueueSite:
    site = KueueSite(
        kubeconfig=t.file("kubeconfig"), context=t.text("context"),
        namespace=t.text("namespace"),
        every_minutes=t.number("every_minutes", 5.0, minimum=0.5),
        timeout_s=t.number("timeout_s", 30.0, minimum=1.0), snapshot=t.file("snapshot"),
        pod_groups=t.file("pod_groups"),
    )
    if site.kubeconfig is None and site.snapshot is None:
        t.fail("kubeconfig", "kubeconfig (API access) or snapshot (a kubectl JSON file)", None)
    t.done()
    return site


def _cluster(name: str, t: SiteTable) -> ClusterSite:
    if not name or set(name) - CLUSTER_NAME_CHARS:
        t.fail("", "a cluster name of letters, digits, '-', '_' and '.'", name)
    parts = {key: t.sub(key) for key in ("slurm", "prometheus", "kueue", "dra")}
    cluster = ClusterSite(
        name=name,
        slurm=_slurm(parts["slurm"]) if parts["slurm"] else None,
        prometheus=_prometheus(parts["prometheus"]) if parts["prometheus"] else None,
        kueue=_kueue(parts["kueue"]) if parts["kueue"] else None,
        node_aliases=t.strings("node_aliases", "a table of \"raw name\" = \"canonical name\""),
        dra=parse_cluster_dra(parts["dra"]) if parts["dra"] else None,
    )
    if not (cluster.slurm or cluster.prometheus or cluster.kueue):
        t.fail("", "at least one source: [slurm], [prometheus] or [kueue]", sorted(t.data))
    t.done()
    return cluster


def _reference(t: SiteTable | None) -> ReferenceSite:
    if t is None:
        return ReferenceSite()
    labels = t.strings("namespace_labels", "a table of identity field = \"label key\"")
    unknown = set(labels) - set(DEFAULT_NAMESPACE_LABELS)
    if unknown:
        t.fail("namespace_labels", f"keys among {sorted(DEFAULT_NAMESPACE_LABELS)}",
               sorted(unknown))
    site = ReferenceSite(
        nodes=t.file("nodes"), accounts=t.file("accounts"),
        identity_map=t.file("identity_map"), rate_card=t.file("rate_card"),
        namespace_labels=labels or dict(DEFAULT_NAMESPACE_LABELS),
    )
    t.done()
    return site


def _schedules(t: SiteTable | None) -> ScheduleSite:
    if t is None:
        return ScheduleSite()
    site = ScheduleSite(enabled=t.flag("enabled", True), daily=t.text("daily", "0 1 * * *"),
                        weekly=t.text("weekly", "0 6 * * 1"), timezone=t.text("timezone", "UTC"))
    for key in ("daily", "weekly"):
        if len(getattr(site, key).split()) != 5:
            t.fail(key, "a cron expression of five fields", getattr(site, key))
    t.done()
    return site


def _alerts(t: SiteTable | None, schedules: object) -> "AlertsSite | None":
    from gpuledger.site.alerts import parse_alerts
    zone = schedules.get("timezone", "UTC") if isinstance(schedules, dict) else "UTC"
    return None if t is None else parse_alerts(t, schedule_timezone=str(zone or "UTC"))


def _focus(t: SiteTable | None, clusters: tuple[ClusterSite, ...]) -> "FocusSite":
    from gpuledger.export.focus import parse_focus_table  # docs/focus.md
    return parse_focus_table(t, clusters)


def load_site(path: Path | str) -> Site:
    """Read and validate a site file (``SiteError`` names the file and key)."""
    path = Path(path)
    if not path.is_file():
        msg = f"expected a site file at {path}, found none"
        raise SiteError(msg)
    try:
        with path.open("rb") as fh:
            doc = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        msg = f"{path}: expected TOML, found a syntax error: {exc}"
        raise SiteError(msg) from None
    top = SiteTable(path, "gpuledger", doc.get("gpuledger", {}))
    unknown_top = sorted(set(doc) - {"gpuledger"})
    if unknown_top:
        msg = (
            f"{path}: expected every setting under [gpuledger], found "
                        f"[{unknown_top[0]}]"
        )
        raise SiteError(msg)
    first = top.get("first_day", (date, str), None, "a date such as 2026-01-05")
    if first is None:
        top.fail("first_day", "the first UTC day to account, such as 2026-01-05", None)
    if isinstance(first, str):
        try:
            first = date.fromisoformat(first)
        except ValueError:
            top.fail("first_day", "a date such as 2026-01-05", first)
    if isinstance(first, datetime):
        top.fail("first_day", "a date such as 2026-01-05", first)
    resources = top.get("gpu_resources", list, list(DEFAULT_GPU_RESOURCES),
                        "a list of resource names")
    if not resources or not all(isinstance(r, str) and r for r in resources):  # type: ignore
        top.fail("gpu_resources", "a list of resource names", resources)
    clusters_table = top.sub("clusters")
    if clusters_table is None or not clusters_table.data:
        top.fail("clusters", "at least one [gpuledger.clusters.<name>] table", None)
    clusters = []
    for name in clusters_table.data:  # type: ignore[union-attr]
        clusters_table.seen.add(name)  # type: ignore[union-attr]
        clusters.append(_cluster(name, SiteTable(path, f"gpuledger.clusters.{name}",
                                              clusters_table.data[name])))  # type: ignore
    dra = parse_dra(top.sub("dra"))  # its Kueue deviceClassMappings count as GPU resources
    resources = [*resources, *dra.gpu_resources()]  # type: ignore[misc]
    site = Site(
        path=path, first_day=first,  # type: ignore[arg-type]
        db=top.file("db") or path.parent / "data" / "gpuledger.duckdb",
        reports_dir=top.file("reports_dir") or path.parent / "reports",
        gpu_resources=tuple(dict.fromkeys(resources)),  # type: ignore[arg-type]
        clusters=tuple(clusters),
        reference=_reference(top.sub("reference")),
        schedules=_schedules(top.sub("schedules")),
        quality=parse_quality(top.sub("quality")),
        sharing=parse_sharing(top.sub("sharing")),
        idle=parse_idle(top.sub("idle"), tuple(clusters)),
        alerts=_alerts(top.sub("alerts"), top.data.get("schedules")),
        focus=_focus(top.sub("focus"), tuple(clusters)),
        engine=parse_engine(top.sub("engine")),
        dra=dra,
    )
    top.done()
    return site


def with_environment(site: Site) -> Site:
    """``GPULEDGER_DB`` and ``GPULEDGER_REPORTS`` (or ``GPULEDGER_REPORTS_DIR``) over the file,
    as for every other setting."""
    from dataclasses import replace
    env = os.environ
    db = env.get("GPULEDGER_DB")
    reports = env.get("GPULEDGER_REPORTS") or env.get("GPULEDGER_REPORTS_DIR")
    # GPULEDGER_GPU_RESOURCES: comma-separated, as the README's settings table says
    resources = tuple(dict.fromkeys(
        r.strip() for r in env.get("GPULEDGER_GPU_RESOURCES", "").split(",") if r.strip()))
    return replace(site, db=Path(db) if db else site.db,
                   reports_dir=Path(reports) if reports else site.reports_dir,
                   gpu_resources=resources or site.gpu_resources)
