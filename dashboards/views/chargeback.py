"""Chargeback for finance: invoice lines per period, by cost centre, team and person."""

from datetime import timedelta
from functools import partial

import polars as pl
import streamlit as st

from dashboards import charts, data, exports
from dashboards.common import day_range_picker, freshness_line, hours, money
from models import attribution

LEVELS = {
    "cost centre": ["cost_centre"],
    "team": ["cost_centre", "team"],
    "person": ["cost_centre", "team", "person"],
}
SPLITS = {
    "nothing": [],
    "domain": ["domain"],
    "GPU model": ["gpu_model"],
    "domain and GPU model": ["domain", "gpu_model"],
}
MEASURES = ["gpu_hours", "slice_hours", "busy_gpu_hours", "idle_gpu_hours",
            "measured_gpu_hours"]
NUMBER_FORMATS = {
    "gpu_hours": st.column_config.NumberColumn("GPU-hours (allocated, physical share)",
                                               format="%.2f"),
    # MIG instances, replicas and shards x hours (docs/shared-gpus.md); 0 for whole GPUs
    "slice_hours": st.column_config.NumberColumn("slice-hours", format="%.2f"),
    "busy_gpu_hours": st.column_config.NumberColumn("busy GPU-hours", format="%.2f"),
    "idle_gpu_hours": st.column_config.NumberColumn("idle GPU-hours", format="%.2f"),
    "measured_gpu_hours": st.column_config.NumberColumn("measured GPU-hours", format="%.2f"),
    "amount": st.column_config.NumberColumn("amount", format="%.2f"),
}


def totals(lines: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Sum invoice lines over ``keys`` (and currency: amounts in two currencies never add)."""
    return (
        lines.group_by([*keys, "currency"])
        .agg(*(pl.col(c).sum() for c in MEASURES), pl.col("amount").sum(),
             pl.col("amount").is_null().any().alias("unpriced"),
             # a total holding a provisional line is provisional too
             *([pl.col("provisional").any()] if "provisional" in lines.columns else []))
        .sort("amount", *keys, descending=[True, *[False] * len(keys)], nulls_last=True)
    )


def show(frame: pl.DataFrame, key: str) -> None:
    shown = frame.with_columns(pl.col(c).cast(pl.Float64) for c in [*MEASURES, "amount"])
    if not shown["unpriced"].any():
        shown = shown.drop("unpriced")
    st.dataframe(shown, hide_index=True, width="stretch", column_config=NUMBER_FORMATS, key=key)


st.title("Chargeback")
freshness_line()

kind_label = st.radio("Period", ["ISO week", "Month", "Custom range"], horizontal=True,
                      key="cb_kind")
if kind_label == "Custom range":
    days = data.allocation_days()
    if days is None:
        st.info("No allocations you may see yet: run `gpuledger build`.")
        st.stop()
    first, end = day_range_picker("Days (UTC)", *days, key="cb_days")
    kind, line_first, line_end = "day", first, end
    period_label = f"{first:%Y-%m-%d} to {end - timedelta(days=1):%Y-%m-%d}"
else:
    kind = "week" if kind_label == "ISO week" else "month"
    periods = data.chargeback_periods(kind)
    if periods.is_empty():
        st.info(f"No {kind}ly invoice lines you may see yet: run `gpuledger build`.")
        st.stop()
    period_label = st.selectbox(kind_label, periods["period"].to_list(), key=f"cb_{kind}")
    start = periods.filter(pl.col("period") == period_label)["period_start"][0]
    first, end = data.period_days(kind, start)
    # one period: the lines whose period starts on this period's first day
    line_first, line_end = start, start + timedelta(days=1)

dims = data.chargeback_dimensions()
cols = st.columns(2)
domains = cols[0].multiselect("Domains", dims["domain"].unique().sort().to_list(),
                              placeholder="all domains", key="cb_domains")
gpu_models = cols[1].multiselect("GPU models", dims["gpu_model"].unique().sort().to_list(),
                                 placeholder="all GPU models", key="cb_models")
lines = data.chargeback_lines(kind, line_first, line_end, domains, gpu_models)
if lines.is_empty():
    st.info("No invoice lines for this selection.")
    st.stop()

# lines without a rate have no amount (a sum over none of them would show "0.00" of no currency)
priced = lines.filter(pl.col("amount").is_not_null())
amounts = priced.group_by("currency").agg(pl.col("amount").sum()).sort("currency")
# one meaning, shared with the weekly report: no cost centre known (models/attribution.py)
unattributed = lines.filter(attribution.unattributed())
incomplete = lines.filter(attribution.incomplete())
metrics = st.columns(6)
metrics[0].metric("Allocated GPU-hours", hours(lines["gpu_hours"].sum()))
metrics[1].metric("Busy GPU-hours", hours(lines["busy_gpu_hours"].sum()))
metrics[2].metric("Idle GPU-hours", hours(lines["idle_gpu_hours"].sum()))
currencies = amounts.filter(pl.col("amount").is_not_null())["currency"].to_list()
if len(currencies) == 1:
    metrics[3].metric(f"Amount ({currencies[0]})", f"{amounts['amount'].drop_nulls()[0]:,.2f}")
else:
    metrics[3].metric("Amount", money(amounts))
metrics[4].metric("Unattributed GPU-hours", hours(unattributed["gpu_hours"].sum()),
                  help="No cost centre known: nobody can be billed (the `unattributed` "
                       "cost centre in the table below).")
metrics[5].metric("Incomplete GPU-hours", hours(incomplete["gpu_hours"].sum()),
                  help="Billed to a known cost centre, but its team or person is unknown.")
if kind == "day":
    st.caption("A custom range adds up daily lines, each rounded to the cent; the weekly and "
               "monthly lines are the invoices.")
provisional = lines.filter(pl.col("provisional"))
if not provisional.is_empty():
    # the data-quality gate (models/quality.py): shown before any figure is read as final
    st.warning(f"Provisional: {provisional.height} line(s) with "
               f"{hours(provisional['gpu_hours'].sum())} GPU-hours hold days whose source data "
               "is incomplete; they may change when the data is repaired.")
    if data.restricted():
        reasons = sorted({r for cell in provisional["provisional_reasons"].drop_nulls()
                          for r in cell.split(" | ")})
        st.caption("Reasons: " + "; ".join(reasons))
    else:
        st.dataframe(data.provisional_days(first, end), hide_index=True, width="stretch",
                     key="cb_provisional")
unpriced = lines.filter(pl.col("amount").is_null())
if not unpriced.is_empty():
    st.warning(f"{unpriced.height} line(s) with {hours(unpriced['gpu_hours'].sum())} GPU-hours "
               "have no valid rate: hours are kept, no amount is shown.")

st.subheader(f"Totals for {period_label}")
cols = st.columns(2)
level = cols[0].radio("Totals by", list(LEVELS), horizontal=True, key="cb_level")
split = cols[1].radio("Split by", list(SPLITS), horizontal=True, key="cb_split")
by_level = totals(lines, LEVELS[level] + SPLITS[split])
show(by_level, key="cb_totals")

chart = totals(priced, ["cost_centre", "domain"]).with_columns(pl.col("amount").cast(pl.Float64))
if chart["currency"].n_unique() > 1:  # stacked bars of two currencies would add them up
    chart = chart.with_columns(pl.format("{} ({})", "cost_centre", "currency").alias("cost_centre"))
figure = charts.bars(chart, x="cost_centre", y="amount", color="domain",
                     labels={"cost_centre": "cost centre", "amount": "amount"})
figure.update_layout(height=300, margin={"t": 10, "b": 10})
st.plotly_chart(figure, width="stretch")

st.subheader("Unattributed")
if unattributed.is_empty():
    st.caption("Every GPU-hour in this selection has a cost centre.")
else:
    st.caption("GPU-hours no identity source gives a cost centre for: nobody can be billed. "
               "The raw keys are on every ledger row: drill down below to fix the identity map.")
    show(totals(unattributed, ["cost_centre", "team", "person", "domain"]), key="cb_unattributed")
if not incomplete.is_empty():
    st.caption("Incomplete: billed to a known cost centre, but no team or person is known.")
    show(totals(incomplete, ["cost_centre", "team", "person", "domain"]), key="cb_incomplete")

st.subheader("Jobs and pods behind a line")
owners = totals(lines, ["cost_centre", "team", "person", "domain", "gpu_model"])
labels = [
    f"{r['cost_centre']} / {r['team']} / {r['person']} / {r['domain']} / {r['gpu_model']}"
    f" — {hours(r['gpu_hours'])} GPU-h"
    for r in owners.iter_rows(named=True)
]
picked = st.selectbox("Line", range(len(labels)), format_func=labels.__getitem__,
                      key="cb_line")
line = owners.row(picked, named=True)
behind = data.allocations_behind(first, end, line)
behind_totals = data.allocations_behind_totals(first, end, line)
st.caption(
    f"{behind_totals['allocations']:,} job(s)/pod(s), {behind_totals['rows']:,} ledger rows, "
    f"{hours(behind_totals['gpu_seconds'] / 3600)} GPU-hours"
    + (f" (first {behind.height:,} rows shown)" if behind.height < behind_totals["rows"] else "")
)
st.dataframe(behind, hide_index=True, width="stretch", key="cb_behind")

st.subheader("Downloads")
slug = period_label.replace(" ", "_")
by_person = totals(lines, ["cost_centre", "team", "person", "domain", "gpu_model"])
cols = st.columns(3)
cols[0].download_button(
    "Invoice lines (CSV)", partial(exports.csv_bytes, lines),
    file_name=f"chargeback-{slug}.csv", mime="text/csv", on_click="ignore", key="cb_csv",
)
cols[1].download_button(
    "Workbook (Excel)",
    partial(exports.excel_bytes, {
        "By cost centre": totals(lines, ["cost_centre"]),
        "By person": by_person,
        "Invoice lines": lines,
    }),
    file_name=f"chargeback-{slug}.xlsx",
    mime="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    on_click="ignore", key="cb_xlsx",
)
cols[2].download_button(
    "Jobs and pods of the line (CSV)", partial(exports.csv_bytes, behind),
    file_name=f"chargeback-{slug}-line.csv", mime="text/csv", on_click="ignore",
    key="cb_behind_csv",
)
