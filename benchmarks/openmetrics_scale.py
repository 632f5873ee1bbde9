"""``openmetrics_scale``: the OpenMetrics file source (the fixture twin of Prometheus) read the
way the Kubernetes ingest reads it, at several file sizes, against the old full scan.

For each size a fresh process writes a file of N pods' ``kube_pod_info`` series (3 samples each,
one a minute), opens it with ``OpenMetricsFileSource`` and reads every pod by uid through
``ksm_keys.read_for_uids`` (batches of uid alternations, the ingest's pattern). *indexed*: as
shipped (a per-label index answers ``uid=~"a|b|…"``); *scan* (the baseline, issue #28's
quadratic finding): the same with the index turned off, every series tested per selector, run
at the smaller sizes only (100 k series took 521 s). Reported: parse and read seconds, the read
time per series from the smallest to the largest size (1.00 = linear), indexed / scan at the
sizes both ran, and each process's peak RSS.
"""

from __future__ import annotations

import json
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from benchmarks import results

NAME = "openmetrics_scale"
INDEXED = (10_000, 30_000, 100_000, 300_000)
SCAN = (10_000, 30_000)
T0 = datetime(2026, 1, 5)


def _write(path: Path, pods: int) -> list[str]:
    uids = [f"{i:08x}-0000-4000-8000-{i:012x}" for i in range(pods)]
    base = int((T0 - datetime(1970, 1, 1)).total_seconds())
    with path.open("w", encoding="utf-8") as fh:
        fh.write("# TYPE kube_pod_info gauge\n")
        for n, uid in enumerate(uids):
            labels = (f'namespace="ns-{n % 50}",pod="pod-{n}",uid="{uid}",'
                      f'node="node-{n % 500}",created_by_kind="Job",created_by_name="job-{n}"')
            for k in range(3):
                fh.write(f"kube_pod_info{{{labels}}} 1 {base + 60 * k}\n")
        fh.write("# EOF\n")
    return uids


def _child(pods: str, mode: str, work: str) -> None:
    from connectors.kubernetes import openmetrics_file
    from connectors.kubernetes.ksm_keys import read_for_uids

    folder = Path(work)
    uids = _write(folder / "pods.om", int(pods))
    if mode == "scan":
        openmetrics_file.OpenMetricsFileSource._indexed = lambda *_: None
    source = openmetrics_file.OpenMetricsFileSource(folder / "pods.om")
    t0 = time.perf_counter()
    assert source.rejects == []
    t1 = time.perf_counter()
    frame = read_for_uids(source, "kube_pod_info", uids, T0, T0 + timedelta(hours=1))
    t2 = time.perf_counter()
    (folder / "result.json").write_text(json.dumps({
        "pods": int(pods), "mode": mode, "parse_s": t1 - t0, "read_s": t2 - t1,
        "rows": frame.height}))


def main(argv: list[str]) -> int:
    p = results.parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=list(INDEXED), metavar="SERIES")
    p.add_argument("--scan-sizes", type=int, nargs="*", default=list(SCAN), metavar="SERIES")
    args = p.parse_args(argv)
    runs: dict[tuple[str, int], dict] = {}
    for mode, sizes in (("indexed", args.sizes), ("scan", args.scan_sizes)):
        for pods in sizes:
            with tempfile.TemporaryDirectory(prefix="gpuledger-om-") as work:
                print(f"openmetrics_scale: {pods:,} series, {mode} ...", flush=True)
                out, peak = results.run_child("benchmarks.openmetrics_scale",
                                              [str(pods), mode, work],
                                              Path(work) / "result.json", f"{pods}-{mode}")
                if out["rows"] != 3 * pods:
                    msg = f"expected {3 * pods} samples read, found {out['rows']}"
                    raise RuntimeError(msg)
                runs[(mode, pods)] = {**out, "peak": peak}
    lines = [
        "## openmetrics_scale — the OpenMetrics file source read as the ingest reads it",
        "",
        f"`kube_pod_info` of N pods (3 samples each), every pod read by uid in the ingest's "
        f"batches; {results.cores()} cores ({results.cpu_model()}), load "
        f"{results.load_average()}; each run in a fresh process. *scan* is the baseline (the "
        "index off: every series tested per selector).",
        "",
        "| series | mode | parse s | read s | read / scan read | peak RSS |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for (mode, pods), r in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        scan = runs.get(("scan", pods))
        ratio = f"{r['read_s'] / scan['read_s']:.3f}×" if scan and mode == "indexed" else ""
        lines.append(f"| {pods:,} | {mode} | {r['parse_s']:.2f} | {r['read_s']:.2f} | {ratio} | "
                     f"{results.mib(r['peak'])} |")
    indexed = sorted(p for m, p in runs if m == "indexed")
    if len(indexed) > 1:
        a, b = runs[("indexed", indexed[0])], runs[("indexed", indexed[-1])]
        growth = (b["read_s"] / a["read_s"]) / (b["pods"] / a["pods"])
        lines += ["", f"Indexed read time per series from {a['pods']:,} to {b['pods']:,} "
                  f"series: {growth:.2f}× (1.00 = linear)."]
    return results.publish(NAME, "\n".join(lines), True, write=not args.no_write)


if __name__ == "__main__":
    results.entry(main, _child, child_args=3)
