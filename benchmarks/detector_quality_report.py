"""The ``benchmarks/RESULTS.md`` section of :mod:`benchmarks.detector_quality`: per seed and
path, pooled per path, the targets. Every figure is one measured in the run."""

from __future__ import annotations

import platform
from datetime import datetime

from benchmarks import results
from benchmarks.detector_quality import (
    DESCRIPTION,
    KINDS,
    MAX_WASTE_ERROR,
    MIN_OVERLAP_SHARE,
    MIN_PRECISION,
    MIN_RECALL,
    NAME,
    PATHS,
    SIM_ARGS,
    KindScore,
    PathRun,
)


def pct(x: float) -> str:
    return "n/a (nothing planted)" if x == float("inf") else f"{x * 100:+.2f} %"


def _listed(items: list[str], limit: int = 12) -> str:
    if not items:
        return "none"
    more = f"; … and {len(items) - limit} more" if len(items) > limit else ""
    return "; ".join(items[:limit]) + more


def _pooled(runs: list[PathRun]) -> tuple[dict[str, KindScore], KindScore]:
    total = {k: KindScore(k) for k in KINDS}
    for r in runs:
        for k in KINDS:
            total[k].add(r.scores[k])
    overall = KindScore("all")
    for k in KINDS:
        overall.add(total[k])
    return total, overall


def _targets(total: dict[str, KindScore], overall: KindScore, flagged: int, decoys: int,
             path: str) -> tuple[list[str], bool]:
    rows, ok = [], True
    checks = []
    for s in total.values():
        checks += [(f"{path}: precision {s.kind} ≥ {MIN_PRECISION}", f"{s.precision:.3f}",
                    s.precision >= MIN_PRECISION),
                   (f"{path}: recall {s.kind} ≥ {MIN_RECALL}", f"{s.recall:.3f}",
                    s.recall >= MIN_RECALL),
                   (f"{path}: wasted GPU-seconds {s.kind} within {MAX_WASTE_ERROR:.0%}",
                    pct(s.total_error), abs(s.total_error) <= MAX_WASTE_ERROR)]
    checks += [(f"{path}: wasted GPU-seconds, all kinds, within {MAX_WASTE_ERROR:.0%}",
                pct(overall.total_error), abs(overall.total_error) <= MAX_WASTE_ERROR),
               (f"{path}: no decoy flagged", f"{flagged} of {decoys} flagged", not flagged)]
    for label, value, good in checks:
        rows.append(f"| {label} | {value} | {'PASS' if good else 'FAIL'} |")
        ok &= good
    return rows, ok


def report(runs: list[PathRun], sim_times: dict[int, float], days: int, load_before: str,
           load_after: str, commit: str) -> tuple[str, bool]:
    seeds = sorted({r.seed for r in runs})
    paths = [p for p in PATHS if any(r.path == p for r in runs)]
    sim = " ".join(SIM_ARGS)
    lines = [
        f"## {NAME} — {DESCRIPTION}",
        "",
        f"Run {datetime.now().astimezone().strftime('%Y-%m-%d %H:%M:%S %Z')} on commit "
        f"{commit} with "
        f"`nice python -m benchmarks.run {NAME} -- --seeds {' '.join(map(str, seeds))} "
        f"--days {days} --paths {' '.join(paths)}`.",
        "",
        f"- Machine: {results.cores()} cores ({results.cpu_model()}), "
        f"{results.memory_gib() or 0:.0f} GiB RAM; Python {platform.python_version()}. "
        f"Load average before: {load_before}; after: {load_after} (other engineers shared the "
        "cores).",
        f"- Worlds: `python -m simulator --seed N --days {days} {sim}`, seeds "
        f"{', '.join(map(str, seeds))} (used by no test, not the demo's 1), cached in "
        "`benchmarks/.cache/`. Paths: `cli` = `gpuledger --config WORLD/gpuledger.toml load` "
        "then `build`; `dagster` = `GPULEDGER_CONFIG=WORLD/gpuledger.toml python -m "
        "pipelines.materialize` over `python -m gpuledger.site.partitions`; each into a fresh "
        "ledger.",
        "- Matching (benchmarks/detector_quality.md): same kind; same GPUs (node when one side "
        "has no GPUs) for double_scheduled and idle_allocation, same owner (Job/Pod) for "
        f"partial_gang; common time ≥ {MIN_OVERLAP_SHARE:.0%} of the longer of the two; one to "
        "one, largest share first. Wasted GPU-seconds: every detection of a kind against every "
        "planted one (`matched` columns: matched pairs only). `keys agree`: matched pairs with "
        "the planted Slurm job and owner.",
        "",
        "| seed | path | kind | planted | detected | matched | keys agree | planted GPU-s | "
        "detected GPU-s | difference | matched diff. | decoys flagged |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        for k in KINDS:
            s = r.scores[k]
            n = sum(f.startswith(tuple(_DECOY_KINDS[k])) for f in r.flagged)
            failed = " (a step failed)" if r.error else ""
            lines.append(f"| {r.seed} | {r.path}{failed} | {k} | {s.planted} | {s.detected} | "
                         f"{s.matched} | {s.keys_agree} | {s.planted_seconds:,} | "
                         f"{s.detected_seconds:,} | {pct(s.total_error)} | "
                         f"{pct(s.waste_error)} | {n} |")
    errors = [f"seed {r.seed} {r.path}: {r.error}" for r in runs if r.error]
    if errors:
        lines += ["", "Failed steps (their ledgers scored as far as they got): "
                  + "; ".join(f"`{e}`" for e in errors) + "."]
    ok, target_rows = not errors, []
    for path in paths:
        mine = [r for r in runs if r.path == path]
        total, overall = _pooled(mine)
        flagged = [f"seed {r.seed}: {f}" for r in mine for f in r.flagged]
        missed = [f"seed {r.seed} {s.kind} {m}" for r in mine for s in r.scores.values()
                  for m in s.misses]
        alarms = [f"seed {r.seed} {s.kind} {a}" for r in mine for s in r.scores.values()
                  for a in s.false_alarms]
        decoys = sum(r.decoys for r in mine)
        lines += [
            "",
            f"Pooled, {path} path ({len(mine)} seed{'s' if len(mine) > 1 else ''}):",
            "",
            "| kind | planted | detected | matched | precision | recall | planted GPU-s | "
            "detected GPU-s | difference | matched diff. |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for s in [*total.values(), overall]:
            lines.append(f"| {s.kind} | {s.planted} | {s.detected} | {s.matched} | "
                         f"{s.precision:.3f} | {s.recall:.3f} | {s.planted_seconds:,} | "
                         f"{s.detected_seconds:,} | {pct(s.total_error)} | "
                         f"{pct(s.waste_error)} |")
        lines += [
            "",
            f"{path}: missed {len(missed)}: {_listed(missed)}.",
            "",
            f"{path}: false alarms {len(alarms)}: {_listed(alarms)}.",
            "",
            f"{path}: decoys flagged {len(flagged)} of {decoys}: {_listed(flagged)}.",
        ]
        rows, good = _targets(total, overall, len(flagged), decoys, path)
        hidden = [f"seed {r.seed} {h.label}" for r in mine for h in r.hidden]
        named = [f"seed {r.seed} {h}" for r in mine for h in r.surfaced]
        unnamed = sorted(set(hidden) - set(named))
        hidden_s = sum(h.gpu_seconds for r in mine for h in r.hidden)
        lines += [
            "",
            f"{path}: planted without evidence (not scored: the pod's GPUs unknown and the node "
            f"never over capacity) {len(hidden)}, {hidden_s:,} GPU-s; named by the data-quality "
            f"gate as unverified overlap {len(named)}; not named: {_listed(unnamed)}.",
        ]
        rows.append(f"| {path}: every double-scheduling without evidence named by the "
                    f"data-quality gate | {len(named)} of {len(hidden)} | "
                    f"{'PASS' if not unnamed else 'FAIL'} |")
        good &= not unnamed
        target_rows += rows
        ok &= good
    others: dict[str, int] = {}
    for r in runs:
        for kind, *_ in r.incidents:
            if kind not in KINDS:
                others[f"{r.path} {kind}"] = others.get(f"{r.path} {kind}", 0) + 1
    if others:
        lines += ["", "Other kinds built, not scored (all seeds): "
                  + ", ".join(f"{k} {n:,}" for k, n in sorted(others.items())) + "."]
    if {"cli", "dagster"} <= set(paths):
        same = [r.seed for r in runs if r.path == "cli" and r.incidents == next(
            (d.incidents for d in runs if d.path == "dagster" and d.seed == r.seed), None)]
        lines += ["", f"CLI and Dagster built the same incidents (kind, node, start, end, "
                      f"GPU-seconds) on seeds: {', '.join(map(str, same)) or 'none'}."]
    lines += [
        "",
        "Times per seed (s; simulate 0 = cached world): " + "; ".join(
            f"seed {s}: simulate {sim_times.get(s, 0):.0f}, " + ", ".join(
                f"{r.path} " + " + ".join(f"{k} {v:.0f}" for k, v in r.times.items())
                for r in runs if r.seed == s) for s in seeds) + ".",
        "",
        "| target | measured | result |",
        "|---|---:|---|",
        *target_rows,
    ]
    lines[2] = lines[2].rstrip(".") + f": **{'PASS' if ok else 'FAIL'}**."
    return "\n".join(lines) + "\n", ok


#: decoy kinds (``world.json`` ``decoys[].kind``) per imitated kind, to count flags per kind
_DECOY_KINDS = {
    "double_scheduled": ("handover_gap", "lingering_succeeded_pod"),
    "partial_gang": ("quick_gang", "partial_admission_min_count"),
    "idle_allocation": ("warmup", "short_zero_phase", "low_but_busy"),
}
