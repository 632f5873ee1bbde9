"""The site's daily partition keys: `python -m gpuledger.site.partitions [SITEFILE]`.

Prints ``--partition YYYY-MM-DD`` arguments for `python -m pipelines.materialize`, one per day
``gpuledger.site.days.accounted_days`` gives (first_day to the last day of data). Without an
argument the site file is ``GPULEDGER_CONFIG``, else ``./gpuledger.toml``.
"""

import sys
from pathlib import Path

from gpuledger.site import SiteError, load_site, site_file
from gpuledger.site.days import accounted_days


def partition_args(path: Path) -> str:
    return " ".join(f"--partition {d.isoformat()}" for d in accounted_days(load_site(path)))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = site_file(argv[0] if argv else None)
    if path is None:
        print("gpuledger.site.partitions: error: expected a site file argument (or "
              "GPULEDGER_CONFIG, "
              "or ./gpuledger.toml), found none", file=sys.stderr)
        return 1
    try:
        print(partition_args(path))
    except SiteError as exc:
        print(f"gpuledger.site.partitions: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
