"""Utilization for operators: allocated and busy fractions, shared GPUs, nodes over time, queue
waits."""

from datetime import timedelta

import polars as pl
import streamlit as st

from dashboards import charts, data
from dashboards.common import day_range_picker, freshness_line, grain_for, restricted_note

FRACTION = st.column_config.NumberColumn(format="%.3f")


def fraction_chart(frame: pl.DataFrame, measures: dict[str, str], y_label: str) -> None:
    """One line per group and measure over time (measures: column -> legend name)."""
    long = frame.unpivot(index=["bucket", "grp"], on=list(measures), variable_name="measure")
    long = long.with_columns(pl.col("measure").replace_strict(measures),
                             pl.col("value").cast(pl.Float64))
    figure = charts.lines(long, x="bucket", y="value", color="grp", dash="measure",
                          labels={"bucket": "UTC", "value": y_label, "grp": "", "measure": ""})
    figure.update_layout(height=340, margin={"t": 10, "b": 10})
    st.plotly_chart(figure, width="stretch")


def wait_section(source: str, title: str, group_label: str) -> None:
    st.markdown(f"**{title}**")
    histogram = data.wait_histogram(source, start, end)
    if histogram.is_empty():
        st.caption("No waits in this range.")
        return
    figure = charts.bars(
        histogram, x="bucket", y="waits", color="grp", barmode="group",
        x_order=[label for _, _, label in data.WAIT_BUCKETS],
        labels={"bucket": "wait", "waits": "count", "grp": group_label},
    )
    figure.update_layout(height=300, margin={"t": 10, "b": 10})
    st.plotly_chart(figure, width="stretch")
    quantiles = data.wait_quantiles(source, start, end).with_columns(
        (pl.col(c) / 60).round(1).alias(c.removesuffix("_s") + "_min")
        for c in ("p50_s", "p90_s", "p99_s", "mean_s", "max_s")
    ).select("grp", "waits", "p50_min", "p90_min", "p99_min", "mean_min", "max_min")
    st.dataframe(quantiles.rename({"grp": group_label}), hide_index=True, width="stretch",
                 key=f"ut_wait_{source}")


def kueue_quota_section() -> None:
    """Last week's share of quota used per ClusterQueue and cohort, borrowing, lending and
    pending time, one queue's hours against its nominal quota, and the Slurm side's week."""
    weeks = data.kueue_quota_weeks()
    if weeks.is_empty():
        st.caption("No Kueue quota gauges in the ledger (kueue_cluster_queue_* need Kueue's "
                   "metrics.enableClusterQueueResources).")
        return
    labels = dict(zip(weeks["week"].to_list(), weeks["week_start"].to_list(), strict=True))
    week = st.selectbox("ISO week", list(labels), key="ut_kueue_week")
    rows = data.kueue_quota_week(labels[week])
    shown = rows.with_columns((pl.col("quota_used_share") * 100).alias("quota_used_pct"))
    columns = {
        "quota_used_pct": st.column_config.NumberColumn("average % of quota used",
                                                        format="%.1f"),
        **{c: st.column_config.NumberColumn(c.replace("_", " "), format="%.2f") for c in (
            "nominal_gpu_hours", "usage_gpu_hours", "borrowed_gpu_hours", "lent_gpu_hours",
            "pending_active_hours", "pending_inadmissible_hours")},
    }
    measures = ["quota_used_pct", "nominal_gpu_hours", "usage_gpu_hours",
                "borrowed_gpu_hours", "lent_gpu_hours"]
    queues = shown.filter(pl.col("scope") == "queue")
    cohorts = shown.filter(pl.col("scope") == "cohort")
    cols = st.columns(3)
    cols[0].metric("Borrowed GPU-hours", f"{queues['borrowed_gpu_hours'].sum():,.2f}")
    cols[1].metric("Lent GPU-hours", f"{queues['lent_gpu_hours'].sum():,.2f}")
    cols[2].metric("Hours with pending workloads (queues summed)",
                   f"{queues['pending_active_hours'].sum() or 0:,.2f}")
    st.markdown(f"**Per ClusterQueue, {week}**")
    st.dataframe(queues.select("cluster", "cluster_queue", "cohort", "flavor", "resource",
                               *measures, "pending_active_hours", "pending_inadmissible_hours",
                               "known_hours", "hours"),
                 hide_index=True, width="stretch", column_config=columns, key="ut_kueue_queues")
    st.markdown(f"**Per cohort, {week}** (a queue without cohort is its own)")
    st.dataframe(cohorts.select("cluster", "cohort", "flavor", "resource", *measures,
                                "known_hours", "hours"),
                 hide_index=True, width="stretch", column_config=columns, key="ut_kueue_cohorts")
    st.caption("Quota bookkeeping of admitted workloads, time-weighted over the hours Kueue's "
               "gauges were scraped; an hour without samples is unknown, never 0 %. Borrowed: "
               "usage above nominal quota; lent: unused nominal quota (within the lending "
               "limit) the cohort's borrowers took (docs/kubernetes.md).")
    cols = st.columns(2)
    with cols[0]:
        names = queues.select("cluster", "cluster_queue").unique(maintain_order=True)
        choices = [f"{c} / {q}" for c, q in names.iter_rows()]
        chosen = st.selectbox("ClusterQueue", choices, key="ut_kueue_queue")
        cluster, queue = chosen.split(" / ", 1)
        hours = data.kueue_quota_hours(labels[week], cluster, queue)
        long = hours.unpivot(index=["hour_start", "flavor"],
                             on=["usage_gpus", "nominal_gpus"], variable_name="measure")
        long = long.with_columns(
            pl.col("measure").replace_strict({"usage_gpus": "in use",
                                              "nominal_gpus": "nominal quota"}),
            pl.col("value").cast(pl.Float64))
        figure = charts.lines(long, x="hour_start", y="value", color="flavor", dash="measure",
                              labels={"hour_start": "UTC", "value": "GPUs", "flavor": "",
                                      "measure": ""})
        figure.update_layout(height=320, margin={"t": 10, "b": 10})
        st.plotly_chart(figure, width="stretch")
        st.caption(f"{queue}: mean GPUs in use and its nominal quota per hour; gaps are hours "
                   "without samples.")
    with cols[1]:
        first = labels[week]
        slurm = data.slurm_gpu_hours_by_account(first, first + timedelta(days=7))
        st.markdown(f"**Slurm side, {week}: GPU-hours per account**")
        if slurm.is_empty():
            st.caption("No Slurm allocations in this week.")
        else:
            st.dataframe(slurm, hide_index=True, width="stretch", key="ut_kueue_slurm",
                         column_config={"gpu_hours": st.column_config.NumberColumn(
                             "GPU-hours", format="%.2f")})
            st.caption("Charged GPU-hours of Slurm jobs in the ledger (allocations), the same "
                       "ISO week.")


st.title("Utilization")
freshness_line()

days = data.allocation_days()
if days is None:
    st.info("No allocations you may see yet: run `gpuledger build`.")
    st.stop()
start, end = day_range_picker("Days (UTC)", *days, key="ut_days")
grain = grain_for(start, end)
restricted = data.restricted()

st.subheader("Allocated and busy over time")
if restricted:
    restricted_note()
    group = st.radio("By", list(data.USAGE_GROUPS), horizontal=True, key="ut_group")
    if not data.has_table("gpu_usage_hourly"):
        st.info("The hourly usage model is not built yet: run `gpuledger build`.")
    else:
        own = data.own_usage_over_time(start, end, grain, group)
        st.caption(f"Your GPU-hours per {grain}, and the busy share of the measured ones.")
        fraction_chart(
            own.with_columns(pl.col("allocated_gpu_seconds") / 3600),
            {"allocated_gpu_seconds": "allocated GPU-hours"}, "GPU-hours",
        )
        fraction_chart(own, {"busy_share": "busy share"}, "busy / measured")
elif data.hourly_usage_available():
    group = st.radio("By", list(data.USAGE_GROUPS), horizontal=True, key="ut_group")
    frame = data.fractions_over_time(start, end, grain, group)
    st.caption(
        f"Share of GPU capacity allocated and busy per {grain}. Domains are shares of the whole "
        "estate's capacity (shared nodes serve both schedulers)."
    )
    fraction_chart(frame, {"allocated_fraction": "allocated", "busy_fraction": "busy"},
                   "fraction of capacity")
    summary = (
        frame.group_by("grp")
        .agg(pl.col("capacity_gpu_seconds").sum(), pl.col("allocated_gpu_seconds").sum(),
             pl.col("busy_gpu_seconds").sum())
        .with_columns(
            (pl.col("allocated_gpu_seconds") / pl.col("capacity_gpu_seconds"))
            .alias("allocated_fraction"),
            (pl.col("busy_gpu_seconds") / pl.col("capacity_gpu_seconds")).alias("busy_fraction"),
        )
        .sort("grp")
    )
    if group == "domain":
        # every domain's row carries the whole estate's capacity once per bucket
        summary = summary.with_columns(
            pl.lit(frame.unique("bucket")["capacity_gpu_seconds"].sum())
            .alias("capacity_gpu_seconds")
        ).with_columns(
            (pl.col("allocated_gpu_seconds") / pl.col("capacity_gpu_seconds"))
            .alias("allocated_fraction"),
            (pl.col("busy_gpu_seconds") / pl.col("capacity_gpu_seconds")).alias("busy_fraction"),
        )
    st.dataframe(summary.rename({"grp": group}), hide_index=True, width="stretch",
                 column_config={"allocated_fraction": FRACTION, "busy_fraction": FRACTION},
                 key="ut_summary")
else:
    group = st.radio("By", list(data.NODE_GROUPS), horizontal=True, key="ut_group")
    st.info("The hourly usage model (`node_usage_hourly`) is not built yet: daily allocated "
            "fractions from the ledger and the inventory are shown; busy time needs it.")
    frame = data.daily_allocated_fractions(start, end, group)
    fraction_chart(frame, {"allocated_fraction": "allocated"}, "fraction of capacity")

st.subheader("Where every GPU-hour went")
if restricted:
    restricted_note()
elif not data.has_table("gpu_conservation_hourly"):
    st.info("The conservation table is not built yet: run `gpuledger build`.")
else:
    went = data.where_gpu_hours_went(start, end)
    if went.is_empty():
        st.caption("No capacity in this range.")
    else:
        figure = charts.bars(went, x="pool", y="gpu_hours", color="state",
                             labels={"pool": "pool", "gpu_hours": "GPU-hours", "state": ""},
                             x_order=went["pool"].unique(maintain_order=True).to_list())
        figure.update_layout(height=340, margin={"t": 10, "b": 10})
        st.plotly_chart(figure, width="stretch", key="ut_conservation")
        st.caption("Each pool's physical GPU-hours of capacity, each in one state: charged per "
                   "scheduler, conflict (held by two at once), infrastructure (a scheduler's own "
                   "agent, e.g. a Slinky slurmd pod), unaccounted use (busy with no holder) and "
                   "idle (docs/accounting.md, \"Conservation\").")
    if data.has_table("gpu_conservation_gpu_hourly"):
        nodes = data.conservation_nodes(start, end)
        if nodes:
            with st.expander("Per GPU: where one node's GPU-hours went"):
                node = st.selectbox("Node", nodes, key="ut_conservation_node")
                st.dataframe(data.where_gpu_hours_went_per_gpu(node, start, end),
                             hide_index=True, width="stretch", key="ut_conservation_gpus")
                st.caption("Each physical GPU's hours as dcgm-exporter's readings place the "
                           "holders (holders: the allocations rows, domain|source_key); "
                           "'not observed' is time without a reading of the GPU, whose "
                           "holders are known only per node (the bars above).")

st.subheader("Shared GPUs")
if restricted:
    restricted_note()
elif not data.has_table("shared_gpu_daily"):
    st.info("The shared-GPU summary needs `shared_gpu_daily`: run `gpuledger build`.")
else:
    shared = data.shared_gpus(start, end)
    if shared.filter(pl.col("sharing") != "whole").is_empty():
        st.caption("No MIG, time-sliced, MPS or sharded GPUs in this range: every allocation "
                   "held whole GPUs.")
    else:
        physical = shared.filter(pl.col("sharing") != "whole")["estate_share"].sum()
        st.metric("Share of charged GPU-hours on shared GPUs", f"{100 * physical:.1f} %")
        st.dataframe(
            shared.with_columns(pl.col(c).cast(pl.Float64) for c in (
                "slice_hours", "physical_gpu_hours", "busy_share", "estate_share", "amount",
                "cost_per_busy_slice_hour")),
            hide_index=True, width="stretch", key="ut_shared",
            column_config={
                "slice_hours": st.column_config.NumberColumn("slice-hours", format="%.2f"),
                "physical_gpu_hours": st.column_config.NumberColumn(
                    "GPU-hours (physical share)", format="%.2f"),
                "busy_share": st.column_config.NumberColumn("busy share of slices",
                                                            format="%.3f"),
                "estate_share": st.column_config.NumberColumn("share of GPU-hours",
                                                              format="%.3f"),
                "amount": st.column_config.NumberColumn("amount", format="%.2f"),
                "cost_per_busy_slice_hour": st.column_config.NumberColumn(
                    "cost per busy slice-hour", format="%.2f"),
            })
        st.caption("MIG instances are charged their compute slices over the GPU's, time-shared "
                   "GPUs split among the holders present (docs/shared-gpus.md); 'whole' rows "
                   "are the rest of the estate.")

st.subheader("Nodes over time")
if restricted:
    restricted_note()
elif not data.has_table("node_usage_hourly"):
    st.info("The node × time view needs `node_usage_hourly`: run `gpuledger build`.")
else:
    measure = st.radio("Colour", ["allocated", "busy"], horizontal=True, key="ut_heat")
    heat = data.node_heatmap(start, end, grain)
    if heat.is_empty():
        st.caption("No node usage in this range.")
    else:
        grid = heat.pivot(on="bucket", index="node", values=f"{measure}_fraction",
                          sort_columns=True).sort("node")
        buckets = grid.columns[1:]
        figure = charts.heatmap(
            grid.select(buckets).cast(pl.Float64).to_numpy(), x=buckets,
            y=grid["node"].to_list(), x_title="UTC", y_title="node",
            colour_title=f"{measure} fraction",
        )
        figure.update_layout(height=max(240, 22 * grid.height + 80), margin={"t": 10, "b": 10})
        st.plotly_chart(figure, width="stretch")

st.subheader("Queue waits")
cols = st.columns(2)
with cols[0]:
    wait_section("slurm", "Slurm: submit → start", "partition")
with cols[1]:
    wait_section("kueue", "Kueue: created → admitted", "ClusterQueue")
    st.caption("Workloads evicted and admitted again are left out: their condition shows only "
               "the latest admission.")
if not restricted:
    metric = data.kueue_admission_wait(start, end, grain)
    if not metric.is_empty():
        st.markdown(f"**Kueue's admission-wait metric: mean wait per {grain} (minutes)**")
        figure = charts.bubbles(
            metric.with_columns(pl.col("mean_wait_s") / 60), x="bucket", y="mean_wait_s",
            size="admissions", color="cluster_queue",
            labels={"bucket": "UTC", "mean_wait_s": "mean wait (min)", "cluster_queue": ""},
        )
        figure.update_layout(height=280, margin={"t": 10, "b": 10})
        st.plotly_chart(figure, width="stretch")

st.subheader("Kueue quota")
if restricted:
    restricted_note()
elif not data.has_table("kueue_quota_weekly"):
    st.info("The Kueue quota history needs `kueue_quota_weekly`: run `gpuledger build`.")
else:
    kueue_quota_section()
