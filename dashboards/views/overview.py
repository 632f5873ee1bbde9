"""Cluster overview: the GPU estate and what has been loaded."""

import streamlit as st

from dashboards import charts, data
from dashboards.common import freshness_line

st.title("Cluster overview")
freshness_line()

gpus = data.inventory_by_pool()
inventory = data.inventory_totals()
cols = st.columns(5)
cols[0].metric("GPUs", f"{inventory['gpus']:,}")
cols[1].metric("Nodes", f"{inventory['nodes']:,}")
cols[2].metric("People in the identity map", f"{inventory['people']:,}")
if not data.restricted():
    activity = data.activity_totals()
    cols[3].metric("Kueue workloads", f"{activity['workloads']:,}")
    cols[4].metric("Slurm runs", f"{activity['slurm_runs']:,}")

st.subheader("Charged GPU-hours by day and domain")
daily = data.gpu_hours_by_day_and_domain()
if daily.is_empty():
    st.info("No allocations built yet: run `gpuledger build`.")
else:
    by_domain = data.gpu_hours_by_domain()
    cols = st.columns(max(by_domain.height, 1))
    for col, row in zip(cols, by_domain.iter_rows(named=True), strict=False):
        col.metric(f"{row['domain'].capitalize()} GPU-hours", f"{row['gpu_hours']:,.1f}")
    figure = charts.bars(
        daily.with_columns(daily["day"].cast(str)), x="day", y="gpu_hours", color="domain",
        labels={"day": "UTC day", "gpu_hours": "GPU-hours"},
    )
    figure.update_layout(height=320, margin={"t": 10, "b": 10}, xaxis_type="category")
    st.plotly_chart(figure, width="stretch")

st.subheader("GPUs by pool and model")
st.dataframe(gpus, hide_index=True, width="stretch")

pool = st.selectbox("Nodes in pool", gpus["pool"].unique().sort().to_list() or ["slurm"])
st.dataframe(data.nodes_in_pool(pool), hide_index=True, width="stretch")
