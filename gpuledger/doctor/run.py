"""``gpuledger doctor``: check a site file end to end and say what to fix.

One line per check, ``OK``, ``WARN`` or ``FAIL``, printed as each check finishes (a slow source
shows where it waits); a FAIL line says "expected …, found …; fix: …". A sample of jobs and pods
is printed under its check, so a person sees the data is right. Exit code 0 when nothing FAILed.

The checks of each source live beside this module (``slurm``, ``prometheus``, ``kueue``, on
the results of ``checks``); they only read, never open the ledger.
"""

import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import polars as pl

from connectors.errors import Reject, SourceError
from connectors.reference_files import read_accounts, read_identity_map, read_nodes, read_rate_card
from gpuledger.doctor.checks import (
    FAIL,
    OK,
    WARN,
    Check,
    describe_reject,
    fail,
    first_line,
    ok,
    warn,
)
from gpuledger.site import Site, SiteError, load_site, site_file, with_environment

# ---------------------------------------------------------------------------- local checks


def _writable(what: str, folder: Path, key: str) -> Check:
    """A folder we will write to: it exists and takes a file, or can be created."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return fail(what, f"a folder at {folder}", f"{existing} which is not a folder",
                    f"point {key} at a folder")
    if existing != folder:
        if os.access(existing, os.W_OK | os.X_OK):
            return ok(what, f"{folder} does not exist yet; {existing} lets it be created")
        return fail(what, f"a writable folder at {folder}",
                    f"it missing and {existing} not writable",
                    f"create {folder} writable by this user, or change {key}")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".gpuledger-doctor-"):
            pass
    except OSError as exc:
        return fail(what, f"a writable folder at {folder}", exc.strerror or first_line(exc),
                    f"make {folder} writable by this user (uid {os.getuid()}), or change {key}")
    return ok(what, f"{folder} is writable")


REFERENCE_READERS: tuple[tuple[str, Callable[[Path], tuple[pl.DataFrame, list[Reject]]]], ...] = (
    ("nodes", read_nodes),
    ("accounts", read_accounts),
    ("identity_map", read_identity_map),
    ("rate_card", read_rate_card),
)


def reference_checks(site: Site) -> Iterator[Check]:
    for key, reader in REFERENCE_READERS:
        path = getattr(site.reference, key)
        what = f"reference {key}"
        if path is None:
            continue
        try:
            frame, rejects = reader(path)
        except (SourceError, OSError, ValueError) as exc:
            yield fail(what, f"a readable {key} CSV at {path}", first_line(exc),
                       f"point [gpuledger.reference].{key} at the file (paths are relative to "
                       f"the site file's folder), or remove the key")
            continue
        if rejects:
            yield warn(what, f"{path}: {frame.height} rows, {len(rejects)} rejected (kept in "
                       f"`rejects` on import); first: {describe_reject(rejects[0])}")
        elif frame.height == 0:
            yield warn(what, f"{path}: a header and no rows")
        else:
            yield ok(what, f"{path}: {frame.height} rows")


# ---------------------------------------------------------------------------- the run


class Doctor:
    """Collects checks and prints each as it comes."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.checks: list[Check] = []

    def add(self, checks: Iterable[Check]) -> None:
        for check in checks:
            self.checks.append(check)
            for line in check.lines():
                print(line, file=self.out, flush=True)

    def count(self, status: str) -> int:
        return sum(c.status == status for c in self.checks)


def cluster_checks(site: Site, now: datetime) -> Iterator[Check]:
    # imported here: each module pulls in its source's client libraries
    from gpuledger.doctor.kueue import kueue_checks
    from gpuledger.doctor.prometheus import prometheus_checks
    from gpuledger.doctor.slurm import slurm_checks

    for c in site.clusters:
        parts = (
            ("slurm", c.slurm, lambda c=c: slurm_checks(c.name, c.slurm, now=now)),
            ("prometheus", c.prometheus, lambda c=c: prometheus_checks(
                c.name, c.prometheus, now=now, gpu_resources=site.gpu_resources)),
            ("kueue", c.kueue, lambda c=c: kueue_checks(c.name, c.kueue)),
        )
        for kind, table, checks in parts:
            if table is None:
                continue
            try:
                yield from checks()
            except Exception as exc:  # one source's surprise must not hide the others
                yield fail(f"{kind} {c.name}", "the checks to finish",
                           f"{type(exc).__name__}: {first_line(exc)}",
                           "report this with the lines above; the other sources are checked")


def run_doctor(config: Path | str | None = None, *, out: TextIO | None = None,
               now: datetime | None = None) -> int:
    """Check the site file ``config`` (else ``GPULEDGER_CONFIG``, else ``./gpuledger.toml``);
    0 when no check FAILed, else 1."""
    out = out or sys.stdout
    doctor = Doctor(out)
    now = now or datetime.now(UTC).replace(tzinfo=None)
    path = site_file(config)
    if path is None:
        doctor.add([fail("site file", "a site file (--config FILE, GPULEDGER_CONFIG or "
                         "./gpuledger.toml)", "none", "write one from the example in "
                         "docs/site-file.md")])
        return _summary(doctor)
    try:
        site = with_environment(load_site(path))
    except SiteError as exc:
        doctor.add([Check(FAIL, "site file", f"{exc}; fix: correct that key (docs/site-file.md)")])
        return _summary(doctor)
    names = ", ".join(c.name for c in site.clusters)
    doctor.add([ok("site file", f"{path} validates: {len(site.clusters)} cluster(s) ({names}), "
                   f"first day {site.first_day}")])
    doctor.add([_writable("ledger folder", site.db.parent, "[gpuledger].db"),
                _writable("reports folder", site.reports_dir, "[gpuledger].reports_dir")])
    doctor.add(reference_checks(site))
    doctor.add(cluster_checks(site, now))
    return _summary(doctor)


def _summary(doctor: Doctor) -> int:
    failed = doctor.count(FAIL)
    print(f"gpuledger doctor: {doctor.count(OK)} OK, {doctor.count(WARN)} WARN, {failed} FAIL",
          file=doctor.out, flush=True)
    return 1 if failed else 0
