"""Namespace owners from kube-state-metrics' ``kube_namespace_labels``, as of one moment.

KSM turns a namespace label ``cost-centre: CC-1`` into the Prometheus label
``label_cost_centre="CC-1"``: ``label_`` in front, every character outside ``[a-zA-Z0-9_]``
(``-``, ``.``, ``/``) to ``_``. It exports only allow-listed labels
(``--metric-labels-allowlist=namespaces=[team,cost-centre]``). Which label names which identity
field is the site's ``[gpuledger.reference] namespace_labels`` (``team = "team"``,
``cost_centre = "cost-centre"``, ``person = "owner"``), given as Kubernetes label keys.

Without ``honor_labels`` the namespace is in ``exported_namespace`` (ksm_labels.py). Samples
without a namespace are rejects; a namespace with none of the labels is no candidate.

Shape: kubernetes/kube-state-metrics internal/store/namespace_test.go
(``kube_namespace_labels{label_app="example1",namespace="ns1"} 1``); fixture
tests/fixtures/expositions/kube-state-metrics-namespace_test.prom.
"""

import re
from collections.abc import Mapping
from datetime import datetime, timedelta

import polars as pl

from connectors.frame_types import SchemaDict
from connectors.kubernetes.ksm_labels import with_workload
from connectors.kubernetes.ksm_nodes import matcher
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import TS, keep_rejects, label
from connectors.times import utc_naive

COMPONENT = "ksm"
IDENTITY_FIELDS = ("person", "team", "cost_centre")
NAMESPACE_OWNER_SCHEMA: SchemaDict = {
    "namespace": pl.String,
    "person": pl.String,
    "team": pl.String,
    "cost_centre": pl.String,
    "labels": pl.String,  # the labels used, "label_team=llm,label_cost_centre=CC-1"
    "observed_at": TS,
}


def ksm_label_name(key: str) -> str:
    """A Kubernetes label key as KSM exports it: ``cost-centre`` -> ``label_cost_centre``,
    ``example.com/team`` -> ``label_example_com_team``."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", key)


def ksm_namespace_owners(
    source: MetricsSource, at: datetime, label_keys: Mapping[str, str], *,
    lookback: timedelta = timedelta(hours=1), selector: str = "",
    rejects: list[pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """One row per namespace that has at least one owner label (``NAMESPACE_OWNER_SCHEMA``).

    `label_keys`: identity field (person, team, cost_centre) -> Kubernetes label key.
    """
    unknown = sorted(set(label_keys) - set(IDENTITY_FIELDS))
    if unknown:
        msg = f"expected namespace label fields among {list(IDENTITY_FIELDS)}, found {unknown}"
        raise ValueError(msg)
    at = utc_naive(at)
    raw = source.raw_samples(matcher("kube_namespace_labels", selector), at - lookback, at)
    if raw.height == 0:
        return pl.DataFrame(schema=NAMESPACE_OWNER_SCHEMA)
    raw = with_workload(raw)
    keep_rejects(rejects, raw.filter(pl.col("_ns").is_null()), COMPONENT,
                 "expected a namespace label, found none")
    raw = raw.filter(pl.col("_ns").is_not_null()).sort("ts")
    latest = raw.group_by("_ns", maintain_order=True).last()
    names = {f: ksm_label_name(label_keys[f]) for f in IDENTITY_FIELDS if f in label_keys}
    cols = [pl.col("_ns").alias("namespace")]
    for f in IDENTITY_FIELDS:
        value = label(latest, names[f]) if f in names else pl.lit(None, pl.String)
        cols.append(value.cast(pl.String).fill_null("").alias(f))
    used = [pl.when(label(latest, n).is_not_null() & (label(latest, n) != ""))
            .then(pl.lit(f"{n}=") + label(latest, n)) for n in names.values()]
    cols.append(pl.concat_str(used, separator=",", ignore_nulls=True).fill_null("")
                .alias("labels") if used else pl.lit("").alias("labels"))
    cols.append(pl.col("ts").alias("observed_at"))
    out = latest.select(cols)
    out = out.filter((pl.col("person") != "") | (pl.col("team") != "")
                     | (pl.col("cost_centre") != ""))
    return out.select(list(NAMESPACE_OWNER_SCHEMA)).sort("namespace")
