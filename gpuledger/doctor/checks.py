"""What a doctor check reports: ``OK``, ``WARN`` or ``FAIL`` with "expected …, found …; fix: …",
and a sample of jobs or pods under it (``gpuledger doctor``, ``gpuledger/doctor/run.py``)."""

import re
from collections.abc import Iterable
from dataclasses import dataclass

from connectors.errors import Reject

OK, WARN, FAIL = "OK", "WARN", "FAIL"
SAMPLE_SIZE = 5  # jobs and pods shown per cluster


@dataclass(frozen=True)
class Check:
    status: str  # OK, WARN or FAIL
    what: str  # e.g. "slurm gpulab: sacct --version"
    detail: str
    samples: tuple[str, ...] = ()  # lines shown under the check (jobs, pods)

    def lines(self) -> list[str]:
        return [f"{self.status:<4} {self.what}: {self.detail}",
                *(f"       {s}" for s in self.samples)]


def ok(what: str, detail: str, samples: Iterable[str] = ()) -> Check:
    return Check(OK, what, detail, tuple(samples))


def warn(what: str, detail: str, samples: Iterable[str] = ()) -> Check:
    return Check(WARN, what, detail, tuple(samples))


def fail(what: str, expected: str, found: object, fix: str) -> Check:
    found = first_line(found) if isinstance(found, BaseException) else str(found)
    if found.startswith("expected ") or ": expected " in found:
        return Check(FAIL, what, f"{found}; fix: {fix}")  # the reader's own words say it
    return Check(FAIL, what, f"expected {expected}, found {found}; fix: {fix}")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    # urllib3 wraps "[Errno 111] Connection refused" in three lines of pool and URL
    refused = re.search(r"\[Errno -?\d+\] ([^'\")]+)", text) if "Max retries" in text else None
    if refused:
        return refused.group(1).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def describe_reject(reject: Reject) -> str:
    return f"{reject.describe()} ({reject.raw[:80]!r})"
