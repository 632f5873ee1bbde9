"""Site files for the ``gpuledger doctor`` tests, and the prefix scripts they use.

The reference files are the sample world's (``sample_data/``): real CSVs the readers accept.
"""

import json
import stat
from pathlib import Path

from gpuledger.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"


def _value(value: object) -> str:
    return json.dumps(value)  # a TOML basic string, number or boolean for what we write


def write_site(folder: Path, clusters: dict[str, dict[str, dict[str, object]]], *,
               reference: dict[str, object] | None = None, db: str = "data/ledger.duckdb",
               name: str = "site.toml") -> Path:
    """A site file in ``folder``: ``clusters`` = {cluster: {"slurm": {...}, ...}}."""
    ref = {key: str(SAMPLE / f"{key}.csv")
           for key in ("nodes", "accounts", "identity_map", "rate_card")}
    ref.update(reference or {})
    lines = ["[gpuledger]", 'first_day = "2026-01-05"', f"db = {_value(db)}",
             'reports_dir = "reports"', "", "[gpuledger.reference]"]
    lines += [f"{k} = {_value(v)}" for k, v in ref.items()]
    for cluster, tables in clusters.items():
        for table, keys in tables.items():
            lines += ["", f"[gpuledger.clusters.{cluster}.{table}]"]
            lines += [f"{k} = {_value(v)}" for k, v in keys.items()]
    path = folder / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def skewed_prefix(folder: Path, seconds: int) -> Path:
    """A prefix like ``ssh slurm-host``: it runs its one argument as a shell command on a
    "host" whose clock is ``seconds`` ahead (a ``date`` first on PATH fakes ``date +%s``)."""
    fake = folder / "skewed-host"
    script(fake / "date", "#!/bin/sh\n"
           f'if [ "$1" = "+%s" ]; then echo $(( $(/usr/bin/date +%s) + {seconds} )); '
           'else exec /usr/bin/date "$@"; fi\n')
    return script(folder / "ssh-skewed", "#!/bin/sh\n"
                  f'PATH="{fake}:$PATH" exec sh -c "$1"\n')


def doctor(site: Path, capsys) -> tuple[int, list[str]]:
    """Run ``gpuledger doctor --config SITE``: its exit code and printed lines."""
    code = main(["doctor", "--config", str(site)])
    return code, capsys.readouterr().out.splitlines()


def line(lines: list[str], what: str) -> str:
    """The one check line whose name is ``what`` (``"slurm a: prefix"``)."""
    found = [ln for ln in lines if ln[5:].startswith(f"{what}: ")]
    assert len(found) == 1, f"expected one line for {what!r}, found {found} in:\n" + \
        "\n".join(lines)
    return found[0]
