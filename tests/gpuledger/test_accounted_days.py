"""The days a site accounts (gpuledger.site.days.accounted_days, `python -m
gpuledger.site.partitions`):
first_day to the last day its file sources hold, or to yesterday for live sources."""

import gzip
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.site import SiteError, load_site
from gpuledger.site.days import accounted_days, openmetrics_last_sample

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"


def _site(tmp_path: Path, clusters: str, first_day: str = "2026-01-05") -> Path:
    path = tmp_path / "gpuledger.toml"
    path.write_text(f'[gpuledger]\nfirst_day = "{first_day}"\n{clusters}', encoding="utf-8")
    return path


def _dump(as_of: str) -> str:
    return ('[gpuledger.clusters.a.slurm]\nmode = "dump"\ndump = "sacct.txt"\n'
            f'dump_as_of = "{as_of}"\n')


def test_the_sample_site_accounts_the_days_of_its_truth():
    days = accounted_days(load_site(SAMPLE / "gpuledger.toml"))
    truth = pl.read_csv(SAMPLE / "truth" / "gpu_seconds_daily.csv", try_parse_dates=True)
    assert days == sorted(set(truth["day"].to_list()))
    assert days[0] == date(2026, 1, 5)
    assert len(days) == 7


def test_partitions_prints_the_sample_site_s_days():
    done = subprocess.run([sys.executable, "-m", "gpuledger.site.partitions",
                           str(SAMPLE / "gpuledger.toml")],
                          capture_output=True, text=True, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    expected = " ".join(f"--partition 2026-01-{d:02d}" for d in range(5, 12))
    assert done.stdout.strip() == expected


def test_partitions_of_a_bad_site_file_is_an_error(tmp_path: Path):
    path = _site(tmp_path, "")
    done = subprocess.run([sys.executable, "-m", "gpuledger.site.partitions", str(path)],
                          capture_output=True, text=True, check=False, cwd=ROOT)
    assert done.returncode == 1
    assert f"{path}: [gpuledger.clusters]: expected at least one" in done.stderr


def test_a_dump_taken_at_midnight_holds_the_day_before(tmp_path: Path):
    site = load_site(_site(tmp_path, _dump("2026-01-08T00:00:00Z")))
    assert accounted_days(site) == [date(2026, 1, 5), date(2026, 1, 6), date(2026, 1, 7)]


def test_a_dump_taken_during_a_day_does_not_hold_that_day(tmp_path: Path):
    # 2026-01-08 01:30 in Berlin is 00:30 UTC: the 8th had begun, it was not over
    site = load_site(_site(tmp_path, _dump("2026-01-08T01:30:00+01:00")))
    assert accounted_days(site)[-1] == date(2026, 1, 7)


def test_live_sources_account_up_to_yesterday(tmp_path: Path):
    site = load_site(_site(tmp_path, '[gpuledger.clusters.a.slurm]\nprefix = "ssh login"\n'))
    assert accounted_days(site, today=date(2026, 1, 9))[-1] == date(2026, 1, 8)
    today = date.today()
    assert accounted_days(site)[-1] in {today - timedelta(days=1), today}  # midnight UTC


def test_an_openmetrics_file_holds_the_day_of_its_last_sample(tmp_path: Path):
    om = tmp_path / "m.om.gz"
    with gzip.open(om, "wt", encoding="utf-8") as fh:
        fh.write("# TYPE up gauge\n"
                 'up{job="a"} 1 1767830400\n'  # 2026-01-08T00:00:00Z
                 'up{job="b"} 1 1767916799.5\n'  # 2026-01-08T23:59:59.5Z (not in order)
                 'up{job="a"} 1 1767830460\n'
                 "# EOF\n"
                 'up{job="a"} 1 1999999999\n')  # after EOF: not read
    assert openmetrics_last_sample(om).isoformat() == "2026-01-08T23:59:59.500000"
    site = load_site(_site(tmp_path,
                           '[gpuledger.clusters.a.prometheus]\nopenmetrics = "m.om.gz"\n'))
    assert accounted_days(site)[-1] == date(2026, 1, 8)


def test_the_latest_source_of_all_clusters_ends_the_days(tmp_path: Path):
    two = _dump("2026-01-07T00:00:00Z") + _dump("2026-01-10T00:00:00Z").replace(
        "clusters.a", "clusters.b")
    assert accounted_days(load_site(_site(tmp_path, two)))[-1] == date(2026, 1, 9)


def test_first_day_after_the_data_gives_no_days(tmp_path: Path):
    site = load_site(_site(tmp_path, _dump("2026-01-07T00:00:00Z"), first_day="2026-02-01"))
    assert accounted_days(site) == []


def test_a_site_whose_sources_do_not_say_how_far_they_go(tmp_path: Path):
    site = load_site(_site(tmp_path, '[gpuledger.clusters.a.kueue]\nsnapshot = "w.json"\n'))
    with pytest.raises(SiteError, match="expected a source that says how far its data goes"):
        accounted_days(site)
