"""Slurm vs Kubernetes: the same questions asked of both schedulers, side by side."""

import pandas as pd
import polars as pl
import streamlit as st
from pandas.io.formats.style import Styler

from dashboards import charts, data
from dashboards.common import day_range_picker, freshness_line

DOMAINS = ("slurm", "kubernetes")
# domain -> the queue whose wait stands for it
QUEUES = {"slurm": "slurm", "kubernetes": "kueue"}


def ratio(numerator: object, denominator: object) -> float | None:
    if numerator is None or not denominator:
        return None
    return float(numerator) / float(denominator)


def wait_text(minutes: float) -> str:
    """A duration in minutes as "15 h 44 min" (to the minute); under a minute in seconds."""
    if round(minutes * 60) < 60:
        return f"{round(minutes * 60)} s"
    whole_hours, rest = divmod(round(minutes), 60)
    return f"{whole_hours} h {rest} min" if whole_hours else f"{rest} min"


# unit -> how a number of that unit reads; currencies (any other unit) read as money
FORMATS = {
    "min": wait_text,
    "s": lambda seconds: wait_text(seconds / 60),
    "count": lambda count: f"{round(count):,}",
    "share": lambda share: f"{100 * share:.1f} %",
    "GPU-h": lambda gpu_hours: f"{gpu_hours:,.1f}",
}


def shown(card: pl.DataFrame) -> Styler:
    """The card with each row in its unit's format; the cells keep their numbers."""
    styler = card.to_pandas().style
    for i, unit in enumerate(card["unit"].to_list()):
        styler = styler.format(FORMATS.get(unit, "{:,.2f}".format), na_rep="–",
                               subset=pd.IndexSlice[[i], list(DOMAINS)])
    return styler


def scorecard(start, end) -> pl.DataFrame:
    """One row per measure, one column per domain (numbers, so they can be checked)."""
    outcomes = {r["domain"]: r for r in data.outcome_summary(start, end).iter_rows(named=True)}
    startups = {r["domain"]: r for r in data.startup_times(start, end).iter_rows(named=True)}
    costs = data.cost_summary(start, end)
    waits = {d: data.wait_overall(QUEUES[d], start, end) for d in DOMAINS}
    rows: list[tuple[str, str, dict[str, float | None]]] = []

    def add(measure: str, unit: str, value) -> None:
        rows.append((measure, unit, {d: value(d) for d in DOMAINS}))

    def outcome(d: str, key: str):
        return outcomes.get(d, {}).get(key)

    add("queue wait, median", "min", lambda d: ratio(waits[d]["p50_s"], 60))
    add("queue wait, p90", "min", lambda d: ratio(waits[d]["p90_s"], 60))
    add("start-up time, median", "s", lambda d: startups.get(d, {}).get("p50_s"))
    add("start-up time, p90", "s", lambda d: startups.get(d, {}).get("p90_s"))
    add("jobs / pods finished", "count", lambda d: outcome(d, "finished"))
    add("failure rate", "share", lambda d: ratio(outcome(d, "failures"), outcome(d, "finished")))
    add("eviction rate", "share",
        lambda d: ratio(outcome(d, "evictions"), outcome(d, "finished")))
    add("GPU-hours lost to failures", "GPU-h",
        lambda d: ratio(outcome(d, "failure_gpu_seconds"), 3600))
    add("GPU-hours lost to evictions", "GPU-h",
        lambda d: ratio(outcome(d, "eviction_gpu_seconds"), 3600))
    for currency in costs["currency"].unique().sort().to_list():
        per = {r["domain"]: r for r in costs.filter(pl.col("currency") == currency)
               .iter_rows(named=True)}
        add(f"cost per busy GPU-hour ({currency or 'no rate'})", currency or "",
            lambda d, per=per: ratio(per.get(d, {}).get("amount"),
                                     per.get(d, {}).get("busy_gpu_hours")))
        add(f"cost per allocated GPU-hour ({currency or 'no rate'})", currency or "",
            lambda d, per=per: ratio(per.get(d, {}).get("amount"),
                                     per.get(d, {}).get("gpu_hours")))
    return pl.DataFrame(
        [{"measure": m, "unit": u, **values} for m, u, values in rows],
        schema={"measure": pl.String, "unit": pl.String,
                **dict.fromkeys(DOMAINS, pl.Float64)},
    )


st.title("Slurm vs Kubernetes")
freshness_line()

days = data.allocation_days()
if days is None:
    st.info("No allocations you may see yet: run `gpuledger build`.")
    st.stop()
start, end = day_range_picker("Days (UTC)", *days, default_days=31, key="sc_days")

card = scorecard(start, end)
# each cell reads in its unit ("15 h 44 min", "10.5 %"), so the unit column is not drawn
st.dataframe(shown(card), hide_index=True, width="stretch", key="sc_card",
             height=36 * card.height + 40, column_order=("measure", *DOMAINS))
st.caption(
    "Queue wait: Slurm submit → start of runs holding GPUs; Kueue workload created → admitted "
    "(admitted once). Start-up: Kueue admission → PodsReady (all pods running); Slurm "
    "allocation start → first step. Failures: failed, timeout, node_fail; evictions: "
    "preempted, evicted, requeued (each job or pod once, out of those finished). Lost "
    "GPU-hours: the allocated time of those jobs and pods. Cost per busy GPU-hour: the amount "
    "charged / busy GPU-hours measured."
)

lost = card.filter(pl.col("unit") == "GPU-h").unpivot(
    index="measure", on=list(DOMAINS), variable_name="domain", value_name="gpu_hours"
)
figure = charts.bars(lost, x="domain", y="gpu_hours", color="measure", barmode="group",
                     labels={"gpu_hours": "GPU-hours", "measure": ""})
figure.update_layout(height=300, margin={"t": 10, "b": 10})
st.plotly_chart(figure, width="stretch")
