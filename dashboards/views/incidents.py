"""Incidents: double-scheduled GPUs and idle allocations, with owners, cost and evidence."""

from datetime import date, datetime, time, timedelta

import polars as pl
import streamlit as st

from dashboards import charts, data
from dashboards.common import day_range_picker, freshness_line, hours, money
from dashboards.text import plain
from models.incidents import KINDS

# findings that waste nothing by the rules (docs/detectors.md): counted, never costed
NOT_WASTE = frozenset({"low_efficiency"})
MARGIN = timedelta(hours=1)
LINK_KEYS = ("incident", "node", "job", "pod", "day", "kind", "person")


def link_day(link: dict[str, str], days: tuple[date, date]) -> date:
    """The link's day when it is one the ledger covers, else the last day."""
    try:
        wanted = date.fromisoformat(link.get("day", ""))
    except ValueError:
        return days[1]
    return wanted if days[0] <= wanted <= days[1] else days[1]


def timeline(node: str, window_start: datetime, window_end: datetime,
             spans: pl.DataFrame) -> None:
    """Both schedulers' allocations on ``node`` as bars, incident spans shaded."""
    allocs = data.node_allocations(node, window_start, window_end)
    if allocs.is_empty():
        st.caption("No allocations on this node in this window.")
        return
    allocs = allocs.with_columns(
        pl.format("{} {} · {} GPU · {}", pl.col("domain"),
                  pl.coalesce("job_id", "name"), pl.col("gpus"),
                  pl.col("source_key").str.slice(0, 8)).alias("allocation")
    )
    figure = charts.timeline(
        allocs, "start_ts", "end_ts", "allocation", "domain",
        hover=["name", "person", "team", "cost_centre", "outcome", "gpu_seconds"],
        colour_map={"slurm": "#1f77b4", "kubernetes": "#ff7f0e"},
    )
    for span in spans.iter_rows(named=True):
        figure.add_vrect(x0=span["start_ts"], x1=span["end_ts"], fillcolor="red", opacity=0.15,
                         line_width=0, annotation_text=span["kind"],
                         annotation_position="top left")
    figure.update_yaxes(autorange="reversed", title=None)
    figure.update_xaxes(range=[window_start, window_end], title="UTC")
    figure.update_layout(height=max(260, 26 * allocs.height + 100), margin={"t": 30, "b": 10})
    st.plotly_chart(figure, width="stretch")
    st.dataframe(allocs.drop("allocation"), hide_index=True, width="stretch",
                 key="in_node_allocations")


def link_filter() -> dict[str, str]:
    """What a link asks to show (alert messages link here, docs/alerts.md):
    ``?incident=<id>``, or ``?node=&job=`` / ``?node=&pod=ns/name`` (with ``day=YYYY-MM-DD``)
    for an alert whose incident the ledger has not built yet, ``?kind=&person=`` (digest)."""
    return {k: str(v) for k, v in st.query_params.to_dict().items()
            if k in LINK_KEYS and str(v).strip()}


def apply_link(frame: pl.DataFrame, link: dict[str, str]) -> pl.DataFrame:
    """The incidents the link names (node lists such as "a;b" match any of their nodes)."""
    if "node" in link:
        frame = frame.filter(pl.col("node").str.split(";").list.contains(link["node"]))
    if "job" in link:
        frame = frame.filter(pl.col("slurm_job") == link["job"])
    if "pod" in link:
        frame = frame.filter(pl.col("k8s_workload") == link["pod"])
    for key in ("kind", "person"):
        if key in link:
            frame = frame.filter(pl.col(key) == link[key])
    return frame


st.title("Incidents")
freshness_line()
link = link_filter()
if link:
    shown_link = ", ".join(f"{k} {plain(v)}" for k, v in link.items())  # text, not Markdown
    st.info(f"Showing what the link names: {shown_link}. Open the page without the link's "
            "query to see every incident.")

days = data.allocation_days()
if days is None:
    st.info("No allocations you may see yet: run `gpuledger build`.")
    st.stop()
start, end = day_range_picker("Days (UTC)", *days, default_days=31, key="in_days")

incidents = pl.DataFrame()
if not data.incidents_available():
    st.info("No incident data yet: the `incidents` table has not been built (the detectors "
            "run in `gpuledger build` and the Dagster `incidents` asset). The node timeline "
            "below works from the ledger alone.")
else:
    kinds = st.multiselect("Kinds", KINDS, placeholder="all kinds", key="in_kinds")
    incidents = data.incidents_list(start, end, kinds)
    if "incident" in link:  # wherever its day lies
        incidents = data.incident_by_id(link["incident"])
        if incidents.is_empty():
            st.warning(f"No incident {plain(link['incident'])} that you may see (rebuilt since the "
                       "link was sent? the detectors' ids are stable for unchanged data).")
    elif link:
        incidents = apply_link(incidents, link)
        if incidents.is_empty():
            st.caption("The ledger has no incident for the link yet (a live alert comes "
                       "before the day is built): the node's timeline is below.")
    by_kind = incidents.group_by("kind").agg(
        pl.len().alias("incidents"), (pl.col("gpu_seconds").sum() / 3600).alias("gpu_hours"),
    )
    cols = st.columns(len(KINDS) + 1)
    for col, kind in zip(cols, KINDS, strict=False):
        row = by_kind.filter(pl.col("kind") == kind)
        count = int(row["incidents"][0]) if row.height else 0
        wasted = ("a finding, not waste" if kind in NOT_WASTE
                  else f"{hours(row['gpu_hours'][0] if row.height else 0)} GPU-h")
        col.metric(kind.replace("_", " ").capitalize(), f"{count:,}", wasted,
                   delta_color="off", delta_arrow="off")
    costs = incidents.group_by("currency").agg(pl.col("cost").sum().alias("amount"))
    cols[-1].metric("Wasted cost", money(costs.sort("currency")))

    per_day = data.incidents_by_day(start, end)
    if kinds:
        per_day = per_day.filter(pl.col("kind").is_in(kinds))
    if not per_day.is_empty():
        per_day = per_day.with_columns(pl.col("day").cast(str))
        # a category axis follows first appearance across the kinds' traces: name the order
        figure = charts.bars(per_day, x="day", y="gpu_hours", color="kind",
                             labels={"day": "UTC day", "gpu_hours": "GPU-hours"},
                             x_order=per_day["day"].unique().sort().to_list())
        figure.update_layout(height=280, margin={"t": 10, "b": 10}, xaxis_type="category")
        st.plotly_chart(figure, width="stretch")

    st.subheader("Incidents, costliest first")
    if incidents.is_empty():
        st.caption("No incident in this range.")
    else:
        shown = incidents.with_columns(
            (pl.col("gpu_seconds") / 3600).round(2).alias("gpu_hours"),
            pl.col("cost").cast(pl.Float64),
        )
        st.dataframe(
            shown.select("kind", "day", "node", "start_ts", "end_ts", "gpu_hours", "cost",
                         "currency", "person", "team", "cost_centre", "other_person",
                         "other_team", "other_cost_centre", "slurm_job", "k8s_workload",
                         "evidence_level", "detail", "evidence", "incident_id"),
            hide_index=True, width="stretch", key="in_table",
            column_config={"cost": st.column_config.NumberColumn(format="%.2f")},
        )

st.subheader("One node: both schedulers' allocations")
focus = None
if not incidents.is_empty():
    labels = ["(pick a node and day instead)"] + [
        f"{r['kind']} · {r['node']} · {r['start_ts']:%Y-%m-%d %H:%M}"
        for r in incidents.iter_rows(named=True)
    ]
    # both schedulers on one node is what the timeline is for: start on the costliest overlap
    kinds_listed = incidents["kind"].to_list()
    default = (kinds_listed.index("double_scheduled") + 1 if "double_scheduled" in kinds_listed
               else 1)
    if link and "incident" not in link and "node" in link:
        default = 0  # the link's node and day below, not an incident's
    choice = st.selectbox("Incident", range(len(labels)), index=default,
                          format_func=labels.__getitem__, key="in_focus")
    focus = incidents.row(choice - 1, named=True) if choice > 0 else None
if focus is not None and focus["start_ts"] is not None and focus["node"]:
    # a partial gang spans several nodes ("a;b;c"): show the first
    node = focus["node"].split(";")[0]
    window_start, window_end = focus["start_ts"] - MARGIN, focus["end_ts"] + MARGIN
else:
    nodes = data.allocated_nodes()
    cols = st.columns(2)
    wanted = link.get("node")
    node = cols[0].selectbox("Node", nodes, key="in_node",
                             index=nodes.index(wanted) if wanted in nodes else 0)
    day = cols[1].date_input("Day (UTC)", value=link_day(link, days), min_value=days[0],
                             max_value=days[1], key="in_day")
    window_start = datetime.combine(day, time())
    window_end = window_start + timedelta(days=1)
spans = (incidents.filter(pl.col("node").str.split(";").list.contains(node))
         if not incidents.is_empty()
         else pl.DataFrame(schema={"kind": pl.String, "start_ts": pl.Datetime,
                                   "end_ts": pl.Datetime}))
spans = spans.filter((pl.col("start_ts") < window_end) & (pl.col("end_ts") > window_start))
st.caption(f"{node}, {window_start:%Y-%m-%d %H:%M} to {window_end:%Y-%m-%d %H:%M} UTC")
if node is not None:
    timeline(node, window_start, window_end, spans)
if data.restricted():
    st.caption("Only the allocations of the cost centres granted to you are drawn.")
