"""``[gpuledger.alerts]`` is validated like the rest of the site file: defaults after Job
Defense Shield, and every bad value named by file and key, "expected …, found …"."""

from pathlib import Path

import pytest

from gpuledger.site import SiteError, load_site

BASE = """[gpuledger]
first_day = "2026-01-05"

[gpuledger.schedules]
timezone = "Europe/Berlin"

[gpuledger.clusters.a.slurm]
mode = "dump"
dump = "sacct.txt"
"""


def _site(tmp_path: Path, alerts: str | None):
    path = tmp_path / "gpuledger.toml"
    path.write_text(BASE + ("" if alerts is None else "\n[gpuledger.alerts]\n" + alerts))
    return load_site(path)


def test_defaults(tmp_path: Path) -> None:
    assert _site(tmp_path, None).alerts is None
    a = _site(tmp_path, "").alerts
    assert a is not None
    assert not a.enabled
    assert not a.dry_run
    assert (a.first_warning_minutes, a.second_warning_minutes, a.every_minutes) == (60, 105, 15)
    assert a.idle_threshold == 0
    assert a.lookback_minutes == 180
    assert not a.action.enabled
    assert a.action.after_minutes == 120
    assert a.timezone == "Europe/Berlin"  # the schedules' zone unless given
    assert a.quiet_hours is None
    assert a.digest_min_gpu_hours == 10


def test_full_table(tmp_path: Path) -> None:
    a = _site(tmp_path, """enabled = true
quiet_hours = "22:00-07:00"
admins = ["ops@example.org"]
contacts = "contacts.csv"
[gpuledger.alerts.action]
enabled = true
slurm_command = ["scancel", "{job_id}"]
kubernetes_command = ["kubectl", "delete", "pod", "-n", "{namespace}", "{pod}"]
""").alerts
    assert a.quiet_hours is not None
    assert f"{a.quiet_hours[0]:%H:%M}" == "22:00"
    assert a.contacts == tmp_path / "contacts.csv"
    assert a.action.command("slurm") == ("scancel", "{job_id}")


@pytest.mark.parametrize(("table", "message"), [
    ("second_warning_minutes = 50", "[gpuledger.alerts.second_warning_minutes]: expected more "
     "than first_warning_minutes (60), found 50"),
    ('quiet_hours = "late"', "[gpuledger.alerts.quiet_hours]: expected a range of local times"),
    ("idle_threshold = 5", "[gpuledger.alerts.idle_threshold]: expected a busy fraction below 1"),
    ('admins = ["ops"]', "[gpuledger.alerts.admins]: expected a list of e-mail addresses"),
    ('timezone = "Mars/Base"', "[gpuledger.alerts.timezone]: expected an IANA time zone"),
    ("lookback_minutes = 90", "[gpuledger.alerts.lookback_minutes]: expected at least "
     "second_warning_minutes"),
    ("colour = 1", "[gpuledger.alerts]: expected only the keys"),
    ('[gpuledger.alerts.action]\nenabled = true\nslurm_command = ["scancel", "{jobid}"]',
     "[gpuledger.alerts.action.slurm_command]: expected placeholders among"),
    ("[gpuledger.alerts.action]\nenabled = true",
     "[gpuledger.alerts.action.slurm_command]: expected slurm_command or kubernetes_command"),
    ('[gpuledger.alerts.action]\nslurm_command = "scancel {job_id}"',
     "[gpuledger.alerts.action.slurm_command]: expected a list of strings"),
])
def test_bad_values_name_file_and_key(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(SiteError) as caught:
        _site(tmp_path, table)
    assert str(caught.value).startswith(str(tmp_path / "gpuledger.toml"))
    assert message in str(caught.value)
