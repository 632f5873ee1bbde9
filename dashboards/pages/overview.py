"""Cluster overview: the GPU estate and what has been loaded."""

import plotly.express as px
import streamlit as st

from dashboards import data
from dashboards.common import freshness_line

st.title("Cluster overview")
freshness_line()

gpus = data.query(
    "SELECT pool, gpu_model, count(DISTINCT node) AS nodes, count(*) AS gpus "
    "FROM nodes GROUP BY pool, gpu_model ORDER BY pool, gpu_model"
)
totals = data.query(
    "SELECT (SELECT count(*) FROM nodes) AS gpus, "
    "(SELECT count(DISTINCT node) FROM nodes) AS nodes, "
    "(SELECT count(*) FROM kueue_workloads_raw) AS workloads, "
    "(SELECT count(*) FROM slurm_runs) AS slurm_runs, "
    "(SELECT count(DISTINCT person) FROM identity_map WHERE person <> '') AS people"
).row(0, named=True)

cols = st.columns(5)
cols[0].metric("GPUs", f"{totals['gpus']:,}")
cols[1].metric("Nodes", f"{totals['nodes']:,}")
cols[2].metric("People in the identity map", f"{totals['people']:,}")
cols[3].metric("Kueue workloads", f"{totals['workloads']:,}")
cols[4].metric("Slurm runs", f"{totals['slurm_runs']:,}")

st.subheader("Charged GPU-hours by day and domain")
daily = data.query(
    "SELECT day, domain, round(sum(gpu_seconds) / 3600.0, 1) AS gpu_hours "
    "FROM allocations GROUP BY day, domain ORDER BY day, domain"
)
if daily.is_empty():
    st.info("No allocations built yet: run `gpuledger build`.")
else:
    by_domain = data.query(
        "SELECT domain, sum(gpu_seconds) / 3600.0 AS gpu_hours FROM allocations "
        "GROUP BY domain ORDER BY domain"
    )
    cols = st.columns(max(by_domain.height, 1))
    for col, row in zip(cols, by_domain.iter_rows(named=True), strict=False):
        col.metric(f"{row['domain'].capitalize()} GPU-hours", f"{row['gpu_hours']:,.1f}")
    figure = px.bar(
        daily.with_columns(daily["day"].cast(str)), x="day", y="gpu_hours", color="domain",
        labels={"day": "UTC day", "gpu_hours": "GPU-hours"},
    )
    figure.update_layout(height=320, margin={"t": 10, "b": 10}, xaxis_type="category")
    st.plotly_chart(figure, width="stretch")

st.subheader("GPUs by pool and model")
st.dataframe(gpus, hide_index=True, width="stretch")

pool = st.selectbox("Nodes in pool", gpus["pool"].unique().sort().to_list() or ["slurm"])
st.dataframe(
    data.query(
        "SELECT node, gpu_model, any_value(gpu_count) AS gpus, any_value(slurm_partition) "
        "AS slurm_partition FROM nodes WHERE pool = ? GROUP BY node, gpu_model ORDER BY node",
        (pool,),
    ),
    hide_index=True,
    width="stretch",
)
