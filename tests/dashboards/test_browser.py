"""The running app in a real headless Chromium (Debian's package, driven by playwright)."""

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gpuledger.cli import main
from models.runner import read_snapshot
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


def _require_chromium() -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("GPULEDGER_REQUIRE_SERVICES") == "1":
            pytest.fail(f"expected Debian chromium at {CHROMIUM}, found none")
        pytest.skip(f"Debian chromium not installed at {CHROMIUM} (make services installs it)")


@contextmanager
def _serve(db: Path, folder: Path) -> Iterator[str]:
    """Run `streamlit run dashboards/app.py` on ``db`` until the block ends; yield its URL."""
    port = _free_port()
    log_path = folder / "streamlit.log"
    log = log_path.open("w")
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
                pytest.fail("streamlit did not come up: " + log_path.read_text()[-2000:])
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


@pytest.fixture
def app_url(tmp_path: Path) -> Iterator[str]:
    _require_chromium()
    db = tmp_path / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(TINY_WORLD)]) == 0
    with _serve(db, tmp_path) as url:
        yield url


@pytest.fixture(scope="module")
def sample_url(sample_ledger: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _require_chromium()
    with _serve(sample_ledger, tmp_path_factory.mktemp("streamlit")) as url:
        yield url


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


# url path -> the page's title; a page other than the default first, on the fresh server
PAGES = {
    "chargeback": "Chargeback",
    "": "Cluster overview",
    "utilization": "Utilization",
    "incidents": "Incidents",
    "scorecard": "Slurm vs Kubernetes",
}


@pytest.mark.parametrize("path", list(PAGES))
def test_every_page_renders_in_chromium(sample_url: str, sample_ledger: Path, tmp_path: Path,
                                        path: str):
    """Each page opened straight from its URL (the first request of a fresh browser), with its
    charts drawn and the sample world's numbers, and a screenshot kept."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 2400})
            page.goto(f"{sample_url}/{path}")
            page.wait_for_selector(f"h1:has-text('{PAGES[path]}')", timeout=60_000)
            page.wait_for_selector("text=Last successful load", timeout=60_000)
            page.wait_for_selector("[data-testid='stPlotlyChart'] .main-svg", timeout=60_000)
            # the router ran (its navigation, not a bare page file): the login gate cannot be
            # skipped by opening a page's URL first
            nav = page.locator("[data-testid='stSidebarNav']").inner_text()
            assert "Finance" in nav
            assert "Operations" in nav
            assert page.locator("[data-testid='stException']").count() == 0
            if path == "chargeback":
                with read_snapshot(sample_ledger) as con:
                    hours = con.execute(
                        "SELECT sum(gpu_seconds) / 3600 FROM allocations WHERE day >= "
                        "DATE '2026-01-05' AND day < DATE '2026-01-12'").fetchone()[0]
                page.wait_for_selector("[data-testid='stMetricValue']", timeout=60_000)
                values = page.locator("[data-testid='stMetricValue']").all_inner_texts()
                assert values[0] == f"{hours:,.1f}"
            shot = tmp_path / f"{path or 'overview'}.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 30_000
        finally:
            browser.close()
