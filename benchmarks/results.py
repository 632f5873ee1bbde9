"""``benchmarks/RESULTS.md``: one section per benchmark, replaced whole on each run."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")
_HEAD = (
    "# Benchmark results\n\n"
    "Written by `make bench` (`python -m benchmarks.run`). Each section is replaced when its "
    "benchmark runs again; every figure in it was measured in that run.\n"
)


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"


def write_section(name: str, body: str, path: Path = RESULTS) -> Path:
    """Put ``body`` between the markers of ``name`` (replacing what was there); keep the rest."""
    begin, end = _markers(name)
    block = f"{begin}\n{body.rstrip()}\n{end}\n"
    text = path.read_text(encoding="utf-8") if path.is_file() else _HEAD
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end) + r"\n?", re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _m: block, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.write_text(text, encoding="utf-8")
    return path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / (1 << 20)
    except OSError:
        pass
    return None


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def load_average() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"
