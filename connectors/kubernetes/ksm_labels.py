"""Which pod, container and node a kube-state-metrics series is about, in either scrape shape.

Prometheus with ``honor_labels: false`` (a ServiceMonitor's default, e.g. the standalone
kube-state-metrics chart's) keeps a series' own labels that clash with the target's as
``exported_<label>`` and gives the plain label the target's value -- kube-state-metrics' own pod::

    kube_pod_info{namespace="monitoring", pod="kube-state-metrics-6d5f8b9c4-x2x7k",
                  exported_namespace="team-a", exported_pod="train-0", ...}

With ``honor_labels: true`` the series' values stay in the plain labels. The rules, per series
(per row: a scrape config may change in the middle of a window):

* ``namespace``, ``pod``, ``container``, ``uid``: ``exported_<l>`` where the series has it, else
  ``<l>``. Every KSM pod metric carries a non-empty namespace and pod (container metrics a
  non-empty container), so a target's value can only sit in the plain label when the series also
  has the exported twin.
* ``node`` of a pod metric: a pod's node is empty until it is bound and Prometheus drops empty
  labels, so without ``honor_labels`` an unbound pod's series show the *target's* node in
  ``node`` and no ``exported_node`` (checked on a real Prometheus by
  tests/prometheus_real/test_scrape_shapes.py). So in the exported shape (the series has
  ``exported_namespace`` or ``exported_pod``) and for a scrape job known to carry a node target
  label, the pod's node is ``exported_node`` only (absent = not bound). A job is known to carry
  one when any of its series has ``exported_node``, or a series of a metric without a node label
  of its own (``kube_pod_status_phase``) carries a plain ``node``.
* ``node`` of a node metric (``kube_node_*``): ``exported_node``, else ``node`` (a node series
  always has a non-empty node).
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from connectors.kubernetes.records import label

# the workload labels, and the private columns holding the workload's values
WORKLOAD = {"namespace": "_ns", "pod": "_pod", "container": "_container", "uid": "_uid",
            "node": "_node"}
_JOB = "job"  # the scrape job: one relabelling, so one set of target labels


def _exported(frame: pl.DataFrame, name: str) -> pl.Expr:
    return label(frame, f"exported_{name}")


def exported_shape(frame: pl.DataFrame) -> pl.Expr:
    """True for the rows of a series scraped without honor_labels (the workload moved)."""
    return (_exported(frame, "namespace").is_not_null()
            | _exported(frame, "pod").is_not_null())


def node_target_jobs(frame: pl.DataFrame, *, own_node: bool) -> set[str | None]:
    """Scrape jobs whose targets carry a ``node`` label, as far as `frame` shows.

    `own_node`: the metric has a node label of its own (requests, kube_pod_info); then only an
    ``exported_node`` proves it. Otherwise (phase, labels, ...) any plain node in the exported
    shape is the target's.
    """
    if frame.height == 0:
        return set()
    proof = (_exported(frame, "node").is_not_null() if own_node
             else exported_shape(frame) & label(frame, "node").is_not_null())
    hits = frame.select(label(frame, _JOB).alias("job"), proof.alias("hit")).filter("hit")
    return set(hits["job"].unique().to_list())


def with_workload(frame: pl.DataFrame, *, node_jobs: Iterable[str | None] = (),
                  node_metric: bool = False) -> pl.DataFrame:
    """`frame` plus ``_ns``, ``_pod``, ``_container``, ``_uid``, ``_node``: the workload's values.

    The raw label columns are left as read (rejects show the series as Prometheus stores it).
    """
    node_jobs = set(node_jobs)
    jobs = sorted(j for j in node_jobs if j is not None)
    null_job = None in node_jobs
    cols = [pl.coalesce(_exported(frame, n), label(frame, n)).alias(WORKLOAD[n])
            for n in ("namespace", "pod", "container", "uid")]
    node = pl.coalesce(_exported(frame, "node"), label(frame, "node"))
    if not node_metric and (jobs or null_job):
        job = label(frame, _JOB)
        carries = job.is_in(jobs) if jobs else pl.lit(False)
        if null_job:
            carries = carries | job.is_null()
        node = (pl.when(exported_shape(frame) & carries)
                .then(_exported(frame, "node")).otherwise(node))
    cols.append(node.alias("_node"))
    # "" is "absent" (Prometheus drops empty labels; in-memory frames may still hold them)
    return frame.with_columns([pl.when(c.cast(pl.String) != "").then(c.cast(pl.String))
                               for c in cols])


def as_workload(frame: pl.DataFrame) -> pl.DataFrame:
    """A `with_workload` frame in the honor_labels shape: the plain labels hold the workload's
    values, the exported twins and private columns are gone."""
    private = [c for c in WORKLOAD.values() if c in frame.columns]
    if not private:
        return frame
    twins = [f"exported_{n}" for n in WORKLOAD if f"exported_{n}" in frame.columns]
    out = frame.with_columns([pl.col(WORKLOAD[n]).alias(n) for n in WORKLOAD
                              if WORKLOAD[n] in frame.columns])
    return out.drop([*twins, *private])
