"""``neighbour_rebuild``: what rebuilding the day before costs a daily build (issue #28, "one
ledger whatever the order of arrival"): a day's build also rebuilds the built days beside it
(``models/build.py`` ``days_to_build``), so in daily operation each run rebuilds yesterday too.

For each world (the committed sample world; a realistic simulated world of the detector-quality
benchmark, generated once into ``benchmarks/.cache/``), a fresh process loads the site into a
new ledger (``gpuledger load``), builds every day but the last at once, then times the last
day's build as ``gpuledger build --start DAY --end DAY+1`` runs it (every stage and the
publish):

* *shipped*: it rebuilds the day before with it (two days),
* *baseline*: the same command with ``days_to_build`` answering the asked days only (one day),

each twice in turn, the lower time kept, and reports the ratio with the process's peak RSS. No
target: the figure says what order-independence costs a daily run.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from benchmarks import results

NAME = "neighbour_rebuild"
ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data" / "gpuledger.toml"
REALISTIC_SEED = 101


def _child(site: str, work: str) -> None:
    from gpuledger.cli import main
    from gpuledger.site import load_site
    from gpuledger.site.days import accounted_days
    from models import build

    db = str(Path(work) / "ledger.duckdb")
    quiet = contextlib.redirect_stderr(io.StringIO())
    days = accounted_days(load_site(Path(site)))
    with quiet:
        assert main(["--config", site, "--db", db, "load"]) == 0
        assert main(["--config", site, "--db", db, "build", "--start", days[0].isoformat(),
                     "--end", days[-1].isoformat()]) == 0
    last = ["--config", site, "--db", db, "build", "--start", days[-1].isoformat(),
            "--end", (days[-1] + timedelta(days=1)).isoformat()]
    shipped = build.days_to_build
    times: dict[str, list[float]] = {"shipped": [], "baseline": []}
    for _ in range(2):
        for kind in ("baseline", "shipped"):
            build.days_to_build = shipped if kind == "shipped" else (lambda _c, a, b: (a, b))
            try:
                t0 = time.perf_counter()
                with contextlib.redirect_stderr(io.StringIO()):
                    assert main(last) == 0
                times[kind].append(time.perf_counter() - t0)
            finally:
                build.days_to_build = shipped
    import duckdb

    with duckdb.connect(db, read_only=True) as con:
        gpus = con.execute("SELECT count(*) FROM nodes").fetchone()[0]
        rows = con.execute("SELECT count(*) FROM allocations WHERE day = ?",
                           [days[-1]]).fetchone()[0]
    (Path(work) / "result.json").write_text(json.dumps({
        "days": len(days), "gpus": gpus, "rows": rows,
        "shipped_s": min(times["shipped"]), "baseline_s": min(times["baseline"])}))


def main(argv: list[str]) -> int:
    p = results.parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--skip-realistic", action="store_true",
                   help="only the sample world (the realistic one is simulated when not cached)")
    args = p.parse_args(argv)
    worlds = [("sample world", SAMPLE)]
    if not args.skip_realistic:
        from benchmarks.detector_quality import DAYS, simulate_world

        folder, _ = simulate_world(REALISTIC_SEED, DAYS)
        worlds.append((f"realistic seed {REALISTIC_SEED}", folder / "gpuledger.toml"))
    runs = []
    for label, site in worlds:
        with tempfile.TemporaryDirectory(prefix="gpuledger-neighbour-") as work:
            print(f"neighbour_rebuild: {label} ...", flush=True)
            out, peak = results.run_child("benchmarks.neighbour_rebuild", [str(site), work],
                                          Path(work) / "result.json", label)
            runs.append({**out, "label": label, "peak": peak})
    lines = [
        "## neighbour_rebuild — what rebuilding the day before costs a daily build",
        "",
        f"The last day of each world built as `gpuledger build --start DAY --end DAY+1` runs it "
        f"(every stage and the publish), after every other day was built; {results.cores()} "
        f"cores ({results.cpu_model()}), load {results.load_average()}; each world in a fresh "
        "process, each time the lower of two runs. *shipped*: the day and the built day before "
        "it (`days_to_build`); *baseline*: the day alone.",
        "",
        "| world | days | GPUs | allocation rows of the day | baseline s | shipped s | "
        "shipped / baseline | peak RSS |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r['label']} | {r['days']} | {r['gpus']:,} | {r['rows']:,} | "
            f"{r['baseline_s']:.2f} | {r['shipped_s']:.2f} | "
            f"{r['shipped_s'] / r['baseline_s']:.2f}× | {results.mib(r['peak'])} |")
    return results.publish(NAME, "\n".join(lines), True, write=not args.no_write)


if __name__ == "__main__":
    results.entry(main, _child, child_args=2)
