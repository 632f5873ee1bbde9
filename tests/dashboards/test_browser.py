"""The running app in a real headless Chromium (Debian's package, driven by playwright)."""

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuledger.cli import main
from tests.helpers import TINY_WORLD

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]

pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def app_url(tmp_path: Path) -> Iterator[str]:
    if not Path(CHROMIUM).exists():
        if os.environ.get("GPULEDGER_REQUIRE_SERVICES") == "1":
            pytest.fail(f"expected Debian chromium at {CHROMIUM}, found none")
        pytest.skip(f"Debian chromium not installed at {CHROMIUM} (make services installs it)")
    db = tmp_path / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(TINY_WORLD)]) == 0
    port = _free_port()
    log = (tmp_path / "streamlit.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "dashboards" / "app.py"),
         "--server.port", str(port), "--server.address", "127.0.0.1",
         "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        env={**os.environ, "GPULEDGER_DB": str(db)}, stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("streamlit did not come up: "
                            + (tmp_path / "streamlit.log").read_text()[-2000:])
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def test_overview_renders_in_chromium(app_url: str, tmp_path: Path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(app_url)
            page.wait_for_selector("text=Cluster overview", timeout=60_000)
            page.wait_for_selector("[data-testid='stMetricValue']", timeout=60_000)
            values = page.locator("[data-testid='stMetricValue']").all_inner_texts()
            assert values[:2] == ["5", "3"]
            assert page.locator("[data-testid='stException']").count() == 0
            shot = tmp_path / "overview.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
        finally:
            browser.close()
