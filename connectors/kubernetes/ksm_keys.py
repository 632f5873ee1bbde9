"""The key of a pod in kube-state-metrics data: its uid, or a synthetic key before KSM v2.1.0.

kube-state-metrics put the ``uid`` label on its pod metrics in v2.1.0 (internal/store/pod.go,
``descPodLabelsDefaultLabels``; v2.0.x has it on ``kube_pod_info`` only). A pod read from an older
KSM is keyed by namespace, name and creation time (``kube_pod_created``, unix seconds), written
in the ``uid`` column as::

    <namespace>/<pod>@<creation time, UTC, to the second>Z     team-a/train-0@2021-03-04T05:06:07Z

A namespace or pod name cannot contain "/" or "@" (DNS labels and subdomains) and a real uid (a
UUID) contains neither, so the two forms never collide and a key parses back into namespace and
pod. A pod deleted and recreated under the same name (StatefulSet) gets a new creation time, so
a new key -- like a new uid.

``read_for_uids`` reads per-pod metrics for a list of keys: real uids with batched
``uid=~"a|b|…"`` matchers, synthetic keys by namespace and pod in both scrape shapes (plain and
``exported_*`` labels, see ksm_labels.py).
"""

from __future__ import annotations

import re
from datetime import datetime

import polars as pl

from connectors.kubernetes.ksm_labels import as_workload, with_workload
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import TS

UID_BATCH = 100  # keys per regex matcher (~4 KB of URL)
CREATED_METRIC = "kube_pod_created"
_SYNTHETIC = re.compile(r"^(?P<ns>[^/@]+)/(?P<pod>[^/@]+)@(?P<created>[0-9T:Z-]+)$")


def regex_literal(value: str) -> str:
    """`value` as an exact-match RE2 pattern inside a PromQL double-quoted string."""
    if re.fullmatch(r"[A-Za-z0-9_.:-]*", value):
        return value.replace(".", "\\\\.")
    return re.escape(value).replace("\\", "\\\\").replace('"', '\\"')


def parse_key(key: str) -> tuple[str, str] | None:
    """(namespace, pod) of a synthetic key; None for a real uid."""
    m = _SYNTHETIC.match(key)
    return (m.group("ns"), m.group("pod")) if m else None


def synthetic_key(namespace: pl.Expr, pod: pl.Expr, created_s: pl.Expr) -> pl.Expr:
    created = pl.from_epoch(created_s.round().cast(pl.Int64), time_unit="s")
    return pl.concat_str([namespace, pl.lit("/"), pod, pl.lit("@"),
                          created.dt.strftime("%Y-%m-%dT%H:%M:%SZ")])


def _empty() -> pl.DataFrame:
    return pl.DataFrame(schema={"ts": TS, "value": pl.Float64, "__name__": pl.String})


def _concat(parts: list[pl.DataFrame]) -> pl.DataFrame:
    parts = [p for p in parts if p.height]
    if not parts:
        return _empty()
    return pl.concat(parts, how="diagonal_relaxed").unique(maintain_order=True)


def read_by_pods(source: MetricsSource, metric: str, pairs: list[tuple[str, str]],
                 start: datetime, end: datetime, matchers: str = "") -> pl.DataFrame:
    """Raw samples of `metric` for (namespace, pod) pairs, in either scrape shape, with the
    workload columns (``with_workload``); only rows of exactly those pairs."""
    extra = f",{matchers}" if matchers else ""
    parts = []
    pairs = sorted(set(pairs))
    for i in range(0, len(pairs), UID_BATCH):
        batch = pairs[i : i + UID_BATCH]
        ns_re = "|".join(regex_literal(n) for n in sorted({n for n, _ in batch}))
        pod_re = "|".join(regex_literal(p) for p in sorted({p for _, p in batch}))
        for ns_label, pod_label in (("namespace", "pod"), ("exported_namespace", "exported_pod")):
            selector = f'{metric}{{{ns_label}=~"{ns_re}",{pod_label}=~"{pod_re}"{extra}}}'
            parts.append(source.raw_samples(selector, start, end))
    frame = with_workload(_concat(parts))
    wanted = pl.DataFrame(pairs, schema={"_ns": pl.String, "_pod": pl.String}, orient="row")
    return frame.join(wanted, on=["_ns", "_pod"], how="semi")


def attach_keys(frame: pl.DataFrame, created: pl.DataFrame, *, use_uid: bool = True
                ) -> pl.DataFrame:
    """`frame` (with workload columns) plus ``_key``: the uid, else the synthetic key from the
    pod's ``kube_pod_created`` sample at or before (else after) each sample; null without both.

    `created`: ``kube_pod_created`` rows with workload columns (``read_by_pods``). With
    `use_uid` false every row gets the synthetic key (KSM v2.0's kube_pod_info has a uid label
    that its other pod metrics lack).
    """
    if frame.height == 0:
        return frame.with_columns(_key=pl.lit(None, dtype=pl.String))
    frame = frame.with_row_index("_i")
    has_uid = pl.col("_uid").is_not_null() if use_uid else pl.lit(False)
    keyed = frame.filter(has_uid).with_columns(_key=pl.col("_uid"))
    bare = frame.filter(~has_uid)
    if bare.height == 0 or created.height == 0:
        bare = bare.with_columns(_key=pl.lit(None, dtype=pl.String))
    else:
        c = (created.filter(pl.col("value").is_finite())
             .select("_ns", "_pod", "ts", pl.col("value").alias("_created"))
             .unique(["_ns", "_pod", "ts"]).sort("ts"))
        bare = bare.sort("ts")
        by = ["_ns", "_pod"]
        back = bare.join_asof(c, on="ts", by=by, strategy="backward", check_sortedness=False)
        ahead = bare.join_asof(c, on="ts", by=by, strategy="forward", check_sortedness=False)
        bare = back.with_columns(
            _created=pl.col("_created").fill_null(ahead["_created"])
        ).with_columns(
            _key=pl.when(pl.col("_created").is_not_null())
            .then(synthetic_key(pl.col("_ns"), pl.col("_pod"), pl.col("_created")))
        ).drop("_created")
    return pl.concat([keyed, bare], how="diagonal_relaxed").sort("_i").drop("_i")


def read_keys(source: MetricsSource, metric: str, keys: list[str], start: datetime,
              end: datetime, matchers: str = "") -> pl.DataFrame:
    """Raw samples of `metric` for the given pod keys, with workload columns and ``_key``."""
    real = sorted({k for k in keys if parse_key(k) is None})
    synthetic = sorted({k for k in keys if parse_key(k) is not None})
    extra = f",{matchers}" if matchers else ""
    parts = []
    for i in range(0, len(real), UID_BATCH):
        batch = "|".join(regex_literal(u) for u in real[i : i + UID_BATCH])
        parts.append(source.raw_samples(f'{metric}{{uid=~"{batch}"{extra}}}', start, end))
    frame = with_workload(_concat(parts))
    frame = frame.filter(pl.col("_uid").is_in(real)).with_columns(_key=pl.col("_uid"))
    if synthetic:
        pairs = [p for p in (parse_key(k) for k in synthetic) if p is not None]
        bare = read_by_pods(source, metric, pairs, start, end, matchers)
        created = (bare if metric == CREATED_METRIC
                   else read_by_pods(source, CREATED_METRIC, pairs, start, end))
        bare = attach_keys(bare, created, use_uid=False)
        frame = pl.concat([frame, bare.filter(pl.col("_key").is_in(synthetic))],
                          how="diagonal_relaxed")
    return frame


def read_for_uids(
    source: MetricsSource, metric: str, uids: list[str], start: datetime, end: datetime,
    matchers: str = "",
) -> pl.DataFrame:
    """Raw samples of `metric` for the given pod keys only, labels as the workload's.

    Per-pod KSM metrics exist for every pod of the cluster; reading only the GPU pods' series
    keeps a read of a big cluster proportional to its GPU pods. The frame has the honor_labels
    shape whatever the scrape was: ``namespace``, ``pod``, ``container``, ``node`` name the
    workload (``exported_*`` read), ``uid`` is the key asked for (a synthetic key for a pod of a
    KSM before v2.1.0).
    """
    frame = read_keys(source, metric, uids, start, end, matchers)
    if frame.height == 0:
        return _empty()
    return as_workload(frame.with_columns(_uid=pl.col("_key")).drop("_key"))
