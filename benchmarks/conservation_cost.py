"""``conservation_cost``: what the conservation tables (``gpu_conservation_hourly`` per node and
``gpu_conservation_gpu_hourly`` per physical GPU, issue #27) add to a day's usage build, at
several estate sizes.

For each size a fresh process loads one day of the engine benchmark's world (``engine_world``:
minute samples of every GPU, both schedulers), then times on the ledger's DuckDB:

* the usage pass as shipped (``build_gpu_usage_hourly``: the usage tables and conservation),
  twice, the lower time kept,
* the same pass with ``build_conservation`` left out (the baseline: the usage tables
  conservation is built beside); conservation's cost is the difference (the readings cut at
  the hours once, then both tables),

and reports conservation's share of the pass and the ratio to the rest of the pass (the
baseline: the usage tables it is built beside), with the process's peak RSS. No target: the
figures say what conservation costs, so a regression shows.
"""

from __future__ import annotations

import json
import tempfile
import time
from datetime import date
from pathlib import Path

from benchmarks import results

NAME = "conservation_cost"
SIZES = (1000, 4000)


def _child(gpus: str, work: str) -> None:
    import duckdb

    from benchmarks import engine_scale, engine_world
    from models import build
    from models.build import build_gpu_usage_hourly
    from models.runner import ensure_schema

    spec = engine_world.WorldSpec(int(gpus), 1, seed=1)
    root = engine_scale.OUT / f"engine-world-{gpus}g-1d-s1"
    meta = engine_world.cached(spec, root, log=lambda *_: None)
    folder = Path(work)
    con = duckdb.connect(str(folder / "ledger.duckdb"))
    con.execute(f"SET threads = {engine_scale.THREADS}")
    ensure_schema(con)
    engine_scale.load_small_tables(con, root)
    rows = engine_scale.load_utilization(con, root)
    day = date.fromisoformat(meta["spec"]["start"])
    t0 = time.perf_counter()
    build_gpu_usage_hourly(con, day, day)
    t1 = time.perf_counter()
    # the same pass without conservation: the baseline, timed the same way
    shipped = build.build_conservation
    build.build_conservation = lambda *_: None
    try:
        t2 = time.perf_counter()
        build_gpu_usage_hourly(con, day, day)
        t3 = time.perf_counter()
    finally:
        build.build_conservation = shipped
    t4 = time.perf_counter()  # and as shipped once more (the lower of the two is kept)
    build_gpu_usage_hourly(con, day, day)
    t5 = time.perf_counter()
    capacity, charged, idle, node_hours = con.execute(
        "SELECT sum(capacity_gpu_seconds), sum(charged_gpu_seconds), sum(idle_gpu_seconds), "
        "count(*) FROM gpu_conservation_hourly").fetchone()
    gpu_hours, gpu_capacity = con.execute(
        "SELECT count(*), sum(charged_gpu_seconds + conflict_gpu_seconds "
        "+ infrastructure_gpu_seconds + unaccounted_gpu_seconds + idle_gpu_seconds "
        "+ not_observed_gpu_seconds) FROM gpu_conservation_gpu_hourly").fetchone()
    con.close()
    (folder / "result.json").write_text(json.dumps({
        "gpus": int(gpus), "samples": rows, "pass_s": min(t1 - t0, t5 - t4),
        "conservation_s": min(t1 - t0, t5 - t4) - (t3 - t2),
        "node_hours": node_hours, "gpu_hours": gpu_hours,
        "gpu_states_h": float(gpu_capacity or 0) / 3600,
        "capacity_gpu_h": float(capacity) / 3600, "charged_gpu_h": float(charged) / 3600,
        "idle_gpu_h": float(idle) / 3600}))


def main(argv: list[str]) -> int:
    p = results.parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), metavar="GPUS")
    args = p.parse_args(argv)
    runs = []
    for gpus in args.sizes:
        with tempfile.TemporaryDirectory(prefix="gpuledger-conservation-") as work:
            print(f"conservation_cost: {gpus:,} GPUs x 1 day ...", flush=True)
            out, peak = results.run_child("benchmarks.conservation_cost", [str(gpus), work],
                                          Path(work) / "result.json", f"{gpus}-GPU")
            runs.append({**out, "peak": peak})
    lines = [
        "## conservation_cost — what conservation (per node and per GPU) adds to a day's "
        "usage build",
        "",
        f"One UTC day of `engine_world` (minute samples of every GPU, both schedulers) on "
        f"{results.cores()} cores ({results.cpu_model()}), load {results.load_average()}; "
        "each size in a fresh process. *pass*: `build_gpu_usage_hourly` as shipped (usage "
        "tables + conservation), the lower of two runs; *rest*: the same pass without "
        "`build_conservation` (the baseline); *conservation*: pass − rest "
        "(`gpu_conservation_hourly` and `gpu_conservation_gpu_hourly`).",
        "",
        "| GPUs | minute samples | node-hours | GPU-hours | pass s | conservation s | rest s | "
        "conservation / rest | share of pass | peak RSS |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        rest = r["pass_s"] - r["conservation_s"]
        lines.append(
            f"| {r['gpus']:,} | {r['samples']:,} | {r['node_hours']:,} | {r['gpu_hours']:,} | "
            f"{r['pass_s']:.2f} | "
            f"{r['conservation_s']:.2f} | {rest:.2f} | {r['conservation_s'] / rest:.2f}× | "
            f"{r['conservation_s'] / r['pass_s']:.0%} | {results.mib(r['peak'])} |")
    if len(runs) > 1:
        a, b = runs[0], runs[-1]
        growth = (b["conservation_s"] / a["conservation_s"]) / (b["samples"] / a["samples"])
        lines += ["", f"Conservation time per sample from {a['gpus']:,} to {b['gpus']:,} GPUs: "
                  f"{growth:.2f}× (1.00 = linear)."]
    lines += ["", "Each run's states add up to its capacity: "
              + "; ".join(f"{r['gpus']:,} GPUs: capacity {r['capacity_gpu_h']:,.0f} GPU-h, "
                          f"charged {r['charged_gpu_h']:,.1f}, idle {r['idle_gpu_h']:,.1f}; "
                          f"its GPU rows' states {r['gpu_states_h']:,.0f} GPU-h"
                          for r in runs) + "."]
    return results.publish(NAME, "\n".join(lines), True, write=not args.no_write)


if __name__ == "__main__":
    results.entry(main, _child, child_args=2)
