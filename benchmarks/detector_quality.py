"""Detector quality: the incidents planted in fresh simulated worlds, found again.

    python -m benchmarks.run detector_quality [--seeds 2 3 4] [--days 7] [--rebuild] [--no-write]

For each seed (never 1, the demo's): ``python -m simulator`` (default 60 s scrape interval, metrics
gzipped), ``gpuledger load-world`` and ``gpuledger build`` into a fresh ledger, then the built
``incidents`` are matched against the world's ``truth/incidents.csv``.

Matching rule (one to one, per kind): a detected incident and a planted one match when they have
the same kind, share a node (``node`` may list several, ``;``-separated, for a gang) and their
``[start, end)`` intervals overlap; pairs are taken greedily, largest overlap first. Precision =
matched / detected, recall = matched / planted, per kind over all seeds. Wasted GPU-seconds:
the matched detections' ``gpu_seconds`` against the matched planted ones'; the relative
difference is the accuracy. Decoys (``world.json`` ``decoys``: a clean handover, a warm-up) are
checked too: an incident of the kind they imitate on their node, GPUs and time is a failure.

Targets (issue #6): precision ≥ 0.95 and recall ≥ 0.95 per kind, wasted GPU-seconds within 1 %.
"""

from __future__ import annotations

import csv
import json
import platform
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from benchmarks import results

NAME = "detector_quality"
DESCRIPTION = "planted incidents in fresh simulated worlds: precision, recall, wasted GPU-seconds"
OUT = Path(__file__).with_name("out")
SEEDS = (2, 3, 4)
DAYS = 7
KINDS = ("double_scheduled", "partial_gang", "idle_allocation")
MIN_PRECISION = 0.95
MIN_RECALL = 0.95
MAX_WASTE_ERROR = 0.01
#: what a decoy would be mistaken for, and how far around its instant it is looked for
DECOY_KIND = {"clean_handover": "double_scheduled", "warmup": "idle_allocation"}
DECOY_SPAN = timedelta(minutes=10)


@dataclass(frozen=True)
class Span:
    """One incident (planted or detected) as the matching rule sees it."""

    kind: str
    nodes: frozenset[str]
    start: datetime
    end: datetime
    gpu_seconds: int = 0
    slurm_job: str = ""
    k8s_workload: str = ""
    label: str = ""
    gpus: frozenset[str] = frozenset()

    def overlap(self, other: Span) -> float:
        """Seconds the two share, or -1 when the matching rule says they are not one incident."""
        if self.kind != other.kind or not self.nodes & other.nodes:
            return -1.0
        seconds = (min(self.end, other.end) - max(self.start, other.start)).total_seconds()
        return seconds if seconds > 0 else -1.0


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", ""))


def _nodes(text: str) -> frozenset[str]:
    return frozenset(n for n in text.split(";") if n)


def truth_incidents(world: Path) -> list[Span]:
    """``truth/incidents.csv`` of a simulated world."""
    with (world / "truth" / "incidents.csv").open(encoding="utf-8", newline="") as fh:
        return [Span(r["kind"], _nodes(r["node"]), _time(r["start"]), _time(r["end"]),
                     int(r["gpu_seconds"]), r["slurm_job"], r["k8s_workload"], r["detail"],
                     _nodes(r["gpu_uuids"]))
                for r in csv.DictReader(fh)]


def decoy_spans(world: Path) -> list[Span]:
    """The world's decoys as the incidents they imitate (``world.json`` ``decoys``)."""
    out = []
    for d in json.loads((world / "world.json").read_text(encoding="utf-8")).get("decoys", []):
        at = _time(d["at"])
        until = _time(d["until"]) if d.get("until") else at + DECOY_SPAN
        out.append(Span(DECOY_KIND[d["kind"]], frozenset({d["node"]}), at - DECOY_SPAN, until,
                        label=f"{d['kind']} {d['node']} {d['at']}",
                        gpus=frozenset(d.get("gpu_uuids") or ())))
    return out


def detected_incidents(rows: Iterable[tuple]) -> list[Span]:
    """Rows of :data:`DETECTED_SQL`."""
    return [Span(k, _nodes(n), s, e, int(g), sj or "", kw or "", i, frozenset(u or ()))
            for k, n, s, e, g, sj, kw, i, u in rows]


DETECTED_SQL = ("SELECT kind, node, start_ts, end_ts, gpu_seconds, slurm_job, k8s_workload, "
                "incident_id, gpu_uuids FROM incidents ORDER BY kind, start_ts")


def match(detected: list[Span], truth: list[Span]) -> list[tuple[int, int]]:
    """One-to-one pairs (detected index, truth index), largest overlap first."""
    candidates = sorted(
        ((d.overlap(t), i, j) for i, d in enumerate(detected) for j, t in enumerate(truth)
         if d.overlap(t) > 0),
        reverse=True,
    )
    used_d: set[int] = set()
    used_t: set[int] = set()
    pairs = []
    for _, i, j in candidates:
        if i not in used_d and j not in used_t:
            used_d.add(i)
            used_t.add(j)
            pairs.append((i, j))
    return sorted(pairs)


@dataclass
class KindScore:
    kind: str
    detected: int = 0
    planted: int = 0
    matched: int = 0
    matched_detected_seconds: int = 0
    matched_planted_seconds: int = 0
    keys_agree: int = 0
    misses: list[str] = field(default_factory=list)
    false_alarms: list[str] = field(default_factory=list)

    def add(self, other: KindScore) -> None:
        self.detected += other.detected
        self.planted += other.planted
        self.matched += other.matched
        self.matched_detected_seconds += other.matched_detected_seconds
        self.matched_planted_seconds += other.matched_planted_seconds
        self.keys_agree += other.keys_agree
        self.misses += other.misses
        self.false_alarms += other.false_alarms

    @property
    def precision(self) -> float:
        return self.matched / self.detected if self.detected else 1.0

    @property
    def recall(self) -> float:
        return self.matched / self.planted if self.planted else 1.0

    @property
    def waste_error(self) -> float:
        if not self.matched_planted_seconds:
            return 0.0
        return (self.matched_detected_seconds - self.matched_planted_seconds) \
            / self.matched_planted_seconds


def score(detected: list[Span], truth: list[Span]) -> dict[str, KindScore]:
    """Per-kind counts and matched GPU-seconds under the matching rule."""
    out = {k: KindScore(k) for k in KINDS}
    for kind in KINDS:
        ds = [d for d in detected if d.kind == kind]
        ts = [t for t in truth if t.kind == kind]
        pairs = match(ds, ts)
        s = out[kind]
        s.detected, s.planted, s.matched = len(ds), len(ts), len(pairs)
        for i, j in pairs:
            s.matched_detected_seconds += ds[i].gpu_seconds
            s.matched_planted_seconds += ts[j].gpu_seconds
            s.keys_agree += (ds[i].slurm_job == ts[j].slurm_job
                             and ds[i].k8s_workload == ts[j].k8s_workload)
        hit_d, hit_t = {i for i, _ in pairs}, {j for _, j in pairs}
        s.misses = [f"{t.kind} {sorted(t.nodes)} {t.start}" for j, t in enumerate(ts)
                    if j not in hit_t]
        s.false_alarms = [f"{d.label} {sorted(d.nodes)} {d.start}" for i, d in enumerate(ds)
                          if i not in hit_d]
    return out


def flagged_decoys(detected: list[Span], decoys: list[Span]) -> list[str]:
    """Decoys that an incident of the kind they imitate overlaps on the decoy's GPUs (when both
    name GPUs: a real incident may share the node and hour) -- each should be none."""
    return [f"{decoy.label} flagged by {d.label}" for decoy in decoys for d in detected
            if d.overlap(decoy) > 0 and (not d.gpus or not decoy.gpus or d.gpus & decoy.gpus)]


# --------------------------------------------------------------------------------------------
# the worlds


def world_dir(seed: int, days: int) -> Path:
    return OUT / f"detector-world-seed-{seed}-days-{days}"


def simulate_world(seed: int, days: int, *, rebuild: bool = False) -> tuple[Path, float]:
    """The simulated world of ``seed`` (cached under benchmarks/out/), and the seconds spent."""
    from simulator import SimConfig, simulate

    folder = world_dir(seed, days)
    if not rebuild and (folder / "truth" / "incidents.csv").is_file():
        return folder, 0.0
    t = time.perf_counter()
    simulate(SimConfig(seed=seed, days=days, gzip_metrics=True), folder)
    return folder, time.perf_counter() - t


def load_and_build(world: Path, db: Path) -> tuple[float, float]:
    """``gpuledger load-world`` then ``gpuledger build`` (in process); seconds of each."""
    from gpuledger.cli import main as gpuledger

    window = json.loads((world / "world.json").read_text(encoding="utf-8"))["window"]
    t = time.perf_counter()
    if gpuledger(["--db", str(db), "load-world", str(world)]) != 0:
        msg = f"expected load-world to succeed on {world}, found a failure"
        raise RuntimeError(msg)
    loaded = time.perf_counter()
    if gpuledger(["--db", str(db), "build", "--start", window["start"], "--end",
                  window["end"]]) != 0:
        msg = f"expected build to succeed on {world}, found a failure"
        raise RuntimeError(msg)
    return loaded - t, time.perf_counter() - loaded


@dataclass
class SeedRun:
    seed: int
    scores: dict[str, KindScore]
    decoys: int
    flagged: list[str]
    simulate_s: float
    load_s: float
    build_s: float
    detect_s: float


def run_seed(seed: int, days: int, *, rebuild: bool = False) -> SeedRun:
    import duckdb

    from models.incidents import build_incidents
    from models.runner import read_snapshot

    world, simulate_s = simulate_world(seed, days, rebuild=rebuild)
    with tempfile.TemporaryDirectory(prefix="detector-quality-") as tmp:
        db = Path(tmp) / "ledger.duckdb"
        load_s, build_s = load_and_build(world, db)
        with duckdb.connect(str(db)) as con:  # the detectors alone, timed (build ran them too)
            first, last = con.execute("SELECT min(day), max(day) FROM allocations").fetchone()
            t = time.perf_counter()
            build_incidents(con, first, last)
            detect_s = time.perf_counter() - t
        with read_snapshot(db) as con:
            detected = detected_incidents(con.execute(DETECTED_SQL).fetchall())
    truth = truth_incidents(world)
    decoys = decoy_spans(world)
    return SeedRun(seed, score(detected, truth), len(decoys), flagged_decoys(detected, decoys),
                   simulate_s, load_s, build_s, detect_s)


# --------------------------------------------------------------------------------------------
# the report


def _pct(x: float) -> str:
    return f"{x * 100:+.2f} %"


def report(runs: list[SeedRun], days: int, load_before: str, load_after: str) -> tuple[str, bool]:
    total = {k: KindScore(k) for k in KINDS}
    for r in runs:
        for k in KINDS:
            total[k].add(r.scores[k])
    overall = KindScore("all")
    for k in KINDS:
        overall.add(total[k])
    flagged = [f for r in runs for f in r.flagged]
    decoys = sum(r.decoys for r in runs)
    lines = [
        f"## {NAME} — {DESCRIPTION}",
        "",
        f"Run {datetime.now().astimezone().strftime('%Y-%m-%d %H:%M:%S %Z')} with "
        f"`python -m benchmarks.run {NAME} -- --seeds {' '.join(str(r.seed) for r in runs)} "
        f"--days {days}`.",
        "",
        f"- Machine: {results.cores()} cores ({results.cpu_model()}), "
        f"{results.memory_gib() or 0:.0f} GiB RAM; Python {platform.python_version()}. "
        f"Load average before: {load_before}; after: {load_after}.",
        f"- Worlds: `python -m simulator --seed N --days {days} --gzip-metrics` (default nodes "
        "hpc=6,k8s=4,shared=2, 60 s scrape interval, irregularities on), seeds "
        f"{', '.join(str(r.seed) for r in runs)} (the demo's seed 1 is not used); each loaded "
        "with `gpuledger load-world` and built with `gpuledger build` into a fresh ledger.",
        "- Matching rule: same kind, a shared node, overlapping `[start, end)`; one to one, "
        "largest overlap first. Wasted GPU-seconds compare the matched pairs. `keys agree`: "
        "matched pairs whose `slurm_job` and `k8s_workload` equal the planted ones.",
        "",
        "| seed | kind | planted | detected | matched | keys agree | planted GPU-s | "
        "detected GPU-s | difference |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        for k in KINDS:
            s = r.scores[k]
            lines.append(f"| {r.seed} | {k} | {s.planted} | {s.detected} | {s.matched} | "
                         f"{s.keys_agree} | {s.matched_planted_seconds:,} | "
                         f"{s.matched_detected_seconds:,} | {_pct(s.waste_error)} |")
    lines += [
        "",
        "| kind (all seeds) | planted | detected | matched | precision | recall | "
        "planted GPU-s | detected GPU-s | difference |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in [*total.values(), overall]:
        lines.append(f"| {s.kind} | {s.planted} | {s.detected} | {s.matched} | "
                     f"{s.precision:.3f} | {s.recall:.3f} | {s.matched_planted_seconds:,} | "
                     f"{s.matched_detected_seconds:,} | {_pct(s.waste_error)} |")
    misses = [m for s in total.values() for m in s.misses]
    alarms = [a for s in total.values() for a in s.false_alarms]
    lines += [
        "",
        f"Missed: {'; '.join(misses) if misses else 'none'}. "
        f"False alarms: {'; '.join(alarms) if alarms else 'none'}. "
        f"Decoys flagged: {len(flagged)} of {decoys}"
        + (f" ({'; '.join(flagged)})" if flagged else "") + ".",
        "",
        "Times per seed (s): " + "; ".join(
            f"seed {r.seed}: simulate {r.simulate_s:.0f} (0 = cached world), load-world "
            f"{r.load_s:.0f}, build {r.build_s:.0f}, detectors alone {r.detect_s:.2f}"
            for r in runs) + ".",
        "",
        "| target | measured | result |",
        "|---|---:|---|",
    ]
    ok = not flagged
    for s in total.values():
        for label, value, good in (
            (f"precision {s.kind} ≥ {MIN_PRECISION}", f"{s.precision:.3f}",
             s.precision >= MIN_PRECISION),
            (f"recall {s.kind} ≥ {MIN_RECALL}", f"{s.recall:.3f}", s.recall >= MIN_RECALL),
            (f"wasted GPU-seconds {s.kind} within {MAX_WASTE_ERROR:.0%}", _pct(s.waste_error),
             abs(s.waste_error) <= MAX_WASTE_ERROR),
        ):
            lines.append(f"| {label} | {value} | {'PASS' if good else 'FAIL'} |")
            ok &= good
    good = abs(overall.waste_error) <= MAX_WASTE_ERROR
    ok &= good
    lines.append(f"| wasted GPU-seconds, all kinds, within {MAX_WASTE_ERROR:.0%} | "
                 f"{_pct(overall.waste_error)} | {'PASS' if good else 'FAIL'} |")
    lines.append(f"| decoys not flagged | {len(flagged)} of {decoys} flagged | "
                 f"{'PASS' if not flagged else 'FAIL'} |")
    head = lines[2]
    lines[2] = head.rstrip(".") + f": **{'PASS' if ok else 'FAIL'}**."
    return "\n".join(lines) + "\n", ok


def main(argv: list[str] | None = None) -> int:
    p = results.parser(NAME, DESCRIPTION)
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS),
                   help=f"simulator seeds, not 1 (default {' '.join(map(str, SEEDS))})")
    p.add_argument("--days", type=int, default=DAYS, help=f"days per world (default {DAYS})")
    p.add_argument("--rebuild", action="store_true", help="re-simulate the cached worlds")
    args = p.parse_args(argv)
    if 1 in args.seeds:
        print("expected seeds other than 1 (the demo's world), found 1", file=sys.stderr)
        return 2
    load_before = results.load_average()
    runs = []
    for seed in args.seeds:
        run = run_seed(seed, args.days, rebuild=args.rebuild)
        runs.append(run)
        print(f"seed {seed}: " + ", ".join(
            f"{k} {s.matched}/{s.planted} found, {s.detected} detected, {_pct(s.waste_error)}"
            for k, s in run.scores.items()) + f"; decoys flagged {len(run.flagged)}",
            flush=True)
    text, ok = report(runs, args.days, load_before, results.load_average())
    return results.publish(NAME, text, ok, write=not args.no_write)


if __name__ == "__main__":
    results.entry(main)
