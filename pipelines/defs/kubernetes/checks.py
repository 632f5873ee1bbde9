"""Checks of one Kubernetes ingest window; each returns the offending rows (a sample of them in
the metadata) and runs next to the assets it checks."""

from datetime import datetime

import dagster as dg
import duckdb

from pipelines.defs.check_results import offending_rows_result, query_rows

OVERLAP_CHECK = "no_overlapping_pod_intervals"
CAPACITY_CHECK = "no_node_over_gpu_capacity"
KSM_COVERAGE_CHECK = "ksm_samples_cover_the_window"
DCGM_COVERAGE_CHECK = "dcgm_samples_cover_the_window"
KUEUE_COVERAGE_CHECK = "kueue_samples_cover_the_window"
KSM_WARNINGS_CHECK = "ksm_metrics_present"
DCGM_WARNINGS_CHECK = "dcgm_metrics_present"
KUEUE_WARNINGS_CHECK = "kueue_metrics_present"
COVERED = 0.99  # share of the window a series must cover


def _result(name: str, asset: str, rows: list[tuple], columns: list[str],
            severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR) -> dg.AssetCheckResult:
    return offending_rows_result(rows, columns, severity=severity, asset_key=asset,
                                 check_name=name)


def no_overlapping_pod_intervals(con: duckdb.DuckDBPyConnection, cluster: str, start: datetime,
                                 end: datetime) -> dg.AssetCheckResult:
    """Two intervals of one pod uid never overlap (the merge joins touching pieces)."""
    rows, cols = query_rows(con, """
        SELECT a.namespace, a.pod, a.uid, a.node, a.start_ts, a.end_ts, b.node AS other_node,
               b.start_ts AS other_start, b.end_ts AS other_end
        FROM k8s_pod_allocations AS a
        JOIN k8s_pod_allocations AS b
          ON a.cluster = b.cluster AND a.uid = b.uid AND a.start_ts < b.start_ts
         AND b.start_ts < a.end_ts
        WHERE a.cluster = ? AND a.start_ts < ? AND a.end_ts > ?
        ORDER BY a.namespace, a.pod, a.start_ts""", [cluster, end, start])
    return _result(OVERLAP_CHECK, "k8s_pod_allocations", rows, cols)


def no_node_over_gpu_capacity(con: duckdb.DuckDBPyConnection, cluster: str, start: datetime,
                              end: datetime) -> dg.AssetCheckResult:
    """At no moment do the pods bound to a node hold more GPUs than the node has (capacity from
    kube_node_status_capacity at that moment, else the inventory)."""
    rows, cols = query_rows(con, """
        WITH pods AS (
            SELECT node, greatest(start_ts, $start) AS s, least(end_ts, $end) AS e, gpus, pod
            FROM k8s_pod_allocations
            WHERE cluster = $cluster AND start_ts < $end AND end_ts > $start
        ),
        events AS (
            SELECT node, s AS ts, gpus AS delta FROM pods
            UNION ALL
            SELECT node, e AS ts, -gpus FROM pods
        ),
        moments AS (
            SELECT node, ts, sum(delta) AS delta FROM events GROUP BY ALL
        ),
        held AS (
            SELECT node, ts, sum(delta) OVER (PARTITION BY node ORDER BY ts) AS gpus_held
            FROM moments
        ),
        inventory AS (
            SELECT node, max(gpu_count) AS gpu_count FROM nodes GROUP BY node
        )
        SELECT h.node, h.ts, h.gpus_held,
               coalesce(c.capacity_gpus, i.gpu_count) AS capacity,
               (SELECT string_agg(p.pod || ' x' || p.gpus, ', ' ORDER BY p.pod) FROM pods AS p
                WHERE p.node = h.node AND p.s <= h.ts AND p.e > h.ts) AS pods
        FROM held AS h
        LEFT JOIN k8s_node_capacity AS c
          ON c.cluster = $cluster AND c.node = h.node AND c.start_ts <= h.ts AND c.end_ts > h.ts
        LEFT JOIN inventory AS i ON i.node = h.node
        WHERE h.gpus_held > coalesce(c.capacity_gpus, i.gpu_count)
        ORDER BY h.node, h.ts""", {"cluster": cluster, "start": start, "end": end})
    return _result(CAPACITY_CHECK, "k8s_pod_allocations", rows, cols)


def ksm_samples_cover_the_window(con: duckdb.DuckDBPyConnection, cluster: str, start: datetime,
                                 end: datetime) -> dg.AssetCheckResult:
    """Every Kubernetes GPU node has kube-state-metrics samples over the whole window
    (node capacity intervals; a gap of more than two scrapes breaks them)."""
    rows, cols = query_rows(con, """
        WITH known AS (
            SELECT DISTINCT node FROM k8s_node_capacity WHERE cluster = $cluster
        ),
        covered AS (
            SELECT node,
                   sum(date_diff('second', greatest(start_ts, $start), least(end_ts, $end)))
                       AS covered_s
            FROM k8s_node_capacity
            WHERE cluster = $cluster AND start_ts < $end AND end_ts > $start
            GROUP BY node
        )
        SELECT k.node, coalesce(c.covered_s, 0) AS covered_s,
               date_diff('second', $start, $end) AS window_s
        FROM known AS k LEFT JOIN covered AS c USING (node)
        WHERE coalesce(c.covered_s, 0) < $share * date_diff('second', $start, $end)
        ORDER BY k.node""", {"cluster": cluster, "start": start, "end": end, "share": COVERED})
    return _result(KSM_COVERAGE_CHECK, "k8s_pod_allocations", rows, cols,
                   dg.AssetCheckSeverity.WARN)


def dcgm_samples_cover_the_window(con: duckdb.DuckDBPyConnection, cluster: str, start: datetime,
                                  end: datetime) -> dg.AssetCheckResult:
    """Every GPU dcgm-exporter reported has samples over the whole window (an exporter outage
    shows here, as GPU-days with less coverage)."""
    rows, cols = query_rows(con, """
        WITH gpus AS (
            SELECT DISTINCT gpu_uuid, gpu_instance, node FROM gpu_busy_daily
            WHERE cluster = $cluster
        ),
        days AS (
            SELECT gpu_uuid, gpu_instance, sum(covered_seconds) AS covered_s
            FROM gpu_busy_daily
            WHERE cluster = $cluster AND day >= CAST($start AS DATE) AND day < CAST($end AS DATE)
            GROUP BY ALL
        )
        SELECT g.node, g.gpu_uuid, g.gpu_instance, round(coalesce(d.covered_s, 0)) AS covered_s,
               date_diff('second', $start, $end) AS window_s
        FROM gpus AS g
        LEFT JOIN days AS d
          ON d.gpu_uuid = g.gpu_uuid AND d.gpu_instance IS NOT DISTINCT FROM g.gpu_instance
        WHERE coalesce(d.covered_s, 0) < $share * date_diff('second', $start, $end)
        ORDER BY g.node, g.gpu_uuid""",
        {"cluster": cluster, "start": start, "end": end, "share": COVERED})
    return _result(DCGM_COVERAGE_CHECK, "gpu_utilization", rows, cols,
                   dg.AssetCheckSeverity.WARN)


def kueue_samples_cover_the_window(con: duckdb.DuckDBPyConnection, cluster: str, start: datetime,
                                   end: datetime) -> dg.AssetCheckResult:
    """Kueue was scraped throughout: hours in which kueue_pending_workloads has fewer samples
    than the scrape interval allows (beyond one) are returned -- a controller restart or a
    scrape outage."""
    rows, cols = query_rows(con, """
        WITH hours AS (
            SELECT window_start, window_end, max(samples) AS samples
            FROM kueue_pending
            WHERE cluster = $cluster AND window_start >= $start AND window_start < $end
            GROUP BY ALL
        ),
        usual AS (SELECT max(samples) AS per_hour FROM hours)
        SELECT h.window_start, h.window_end, h.samples, u.per_hour AS expected
        FROM hours AS h, usual AS u
        WHERE h.samples < u.per_hour - 1
           AND date_diff('second', h.window_start, h.window_end) = 3600
        ORDER BY h.window_start""", {"cluster": cluster, "start": start, "end": end})
    return _result(KUEUE_COVERAGE_CHECK, "kueue_metrics", rows, cols,
                   dg.AssetCheckSeverity.WARN)


def _warnings(con: duckdb.DuckDBPyConnection, name: str, asset: str, components: tuple[str, ...],
              cluster: str, start: datetime, end: datetime) -> dg.AssetCheckResult:
    rows, cols = query_rows(con, f"""
        SELECT component, message FROM k8s_ingest_warnings
        WHERE cluster = ? AND window_start = ? AND window_end = ?
          AND component IN ({", ".join("?" for _ in components)})
        ORDER BY component, message""", [cluster, start, end, *components])
    return _result(name, asset, rows, cols, dg.AssetCheckSeverity.WARN)


def ksm_metrics_present(con: duckdb.DuckDBPyConnection, cluster: str, start: datetime,
                        end: datetime) -> dg.AssetCheckResult:
    return _warnings(con, KSM_WARNINGS_CHECK, "k8s_pod_allocations", ("ksm", "prometheus"),
                     cluster, start, end)


def dcgm_metrics_present(con: duckdb.DuckDBPyConnection, cluster: str, start: datetime,
                         end: datetime) -> dg.AssetCheckResult:
    return _warnings(con, DCGM_WARNINGS_CHECK, "gpu_utilization", ("dcgm",), cluster, start, end)


def kueue_metrics_present(con: duckdb.DuckDBPyConnection, cluster: str, start: datetime,
                          end: datetime) -> dg.AssetCheckResult:
    return _warnings(con, KUEUE_WARNINGS_CHECK, "kueue_metrics", ("kueue",), cluster, start, end)


WINDOW_CHECKS = (
    ("k8s_pod_allocations", OVERLAP_CHECK, no_overlapping_pod_intervals,
     "No two intervals of one pod uid overlap; returns the overlapping pairs."),
    ("k8s_pod_allocations", CAPACITY_CHECK, no_node_over_gpu_capacity,
     "Pods alone never hold more GPUs on a node than it has; returns the moments they do."),
    ("k8s_pod_allocations", KSM_COVERAGE_CHECK, ksm_samples_cover_the_window,
     "kube-state-metrics samples cover the window for every GPU node (WARN)."),
    ("k8s_pod_allocations", KSM_WARNINGS_CHECK, ksm_metrics_present,
     "Every kube-state-metrics metric the reader uses was present (WARN; returns the warnings)."),
    ("gpu_utilization", DCGM_COVERAGE_CHECK, dcgm_samples_cover_the_window,
     "dcgm-exporter samples cover the window for every GPU (WARN: exporter outages)."),
    ("gpu_utilization", DCGM_WARNINGS_CHECK, dcgm_metrics_present,
     "DCGM metrics present and every holder label recognised (WARN; returns the warnings)."),
    ("kueue_metrics", KUEUE_COVERAGE_CHECK, kueue_samples_cover_the_window,
     "Kueue scraped every hour of the window (WARN: controller restarts, scrape gaps)."),
    ("kueue_metrics", KUEUE_WARNINGS_CHECK, kueue_metrics_present,
     "Every Kueue metric the reader uses was present (WARN; returns the warnings)."),
)
