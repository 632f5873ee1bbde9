"""``benchmarks/RESULTS.md``: one section per benchmark, replaced whole on each run."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
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


def mib(n: float) -> str:
    return f"{n / (1 << 20):,.0f} MiB"


def parser(name: str, description: str) -> argparse.ArgumentParser:
    """The options of benchmark ``name``, with the ``--no-write`` every benchmark has."""
    p = argparse.ArgumentParser(prog=f"python -m benchmarks.run {name}", description=description)
    p.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    return p


def publish(name: str, text: str, ok: bool, *, write: bool) -> int:
    """Print the report, put it in RESULTS.md when ``write``; the exit status (1: a target
    missed)."""
    print(text)
    if write:
        print(f"wrote {write_section(name, text)}")
    return 0 if ok else 1


def run_child(module: str, args: Sequence[str], result: Path, what: str,
              cwd: Path | None = None) -> tuple[dict, int]:
    """Run ``python -m module --child ARGS`` (one measurement in a fresh process) and wait for
    it: the JSON it wrote to ``result`` and its peak RSS in bytes (``wait4``, which only the
    parent can read). If this process is interrupted, the child goes too."""
    proc = subprocess.Popen([sys.executable, "-m", module, "--child", *args], cwd=cwd)
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except BaseException:  # Ctrl-C, SIGTERM (SystemExit)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
        raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        msg = f"expected the {what} run to succeed, found exit status {proc.returncode}"
        raise RuntimeError(msg)
    return json.loads(result.read_text()), usage.ru_maxrss * 1024


def entry(main: Callable[[list[str]], int], child: Callable[..., None] | None = None,
          child_args: int = 0) -> None:
    """A benchmark's ``__main__``: ``--child`` and ``child_args`` arguments run ``child`` (see
    run_child); anything else goes to ``main``, whose status is the exit status."""
    argv = sys.argv[1:]
    if child is not None and len(argv) == child_args + 1 and argv[0] == "--child":
        child(*argv[1:])
    else:
        sys.exit(main(argv))
