"""Where reports go: ``GPULEDGER_REPORTS``, else the ``reports_dir`` setting (env
``GPULEDGER_REPORTS_DIR`` or ``gpuledger.toml``), else ``reports/``."""

import os
from pathlib import Path

from gpuledger.site.config import Settings, load_settings


def reports_dir(settings: Settings | None = None) -> Path:
    if os.environ.get("GPULEDGER_REPORTS"):
        return Path(os.environ["GPULEDGER_REPORTS"])
    return (settings or load_settings()).reports_dir
