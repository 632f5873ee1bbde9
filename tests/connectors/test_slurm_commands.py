import stat
from pathlib import Path

import pytest

from connectors.errors import SourceError
from connectors.slurm.commands import CommandRunner


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_environment_is_passed_through_env(tmp_path: Path):
    tool = _script(tmp_path, "fake-sacct", 'echo "TZ=$TZ FMT=$SLURM_TIME_FORMAT args=$*"\n')
    out = CommandRunner().run([str(tool), "-a"], {"TZ": "UTC", "SLURM_TIME_FORMAT": "%s"})
    assert out == "TZ=UTC FMT=%s args=-a\n"


def test_prefix_quotes_the_remote_command():
    runner = CommandRunner.from_prefix("ssh -o BatchMode=yes login1")
    argv = runner.argv(["sacct", "--delimiter=\x1f", "--format=JobID,JobName"], {"TZ": "UTC"})
    assert argv[:3] == ["ssh", "-o", "BatchMode=yes"]
    assert argv[3] == "login1"
    assert argv[4] == "env TZ=UTC sacct '--delimiter=\x1f' --format=JobID,JobName"


def test_prefix_runs_through_a_local_shell(tmp_path: Path):
    tool = _script(tmp_path, "fake-sacct", 'echo "TZ=$TZ"\n')
    runner = CommandRunner.from_prefix("sh -c")
    assert runner.run([str(tool)], {"TZ": "UTC"}) == "TZ=UTC\n"


def test_failure_names_the_command_and_its_stderr_after_retries(tmp_path: Path):
    calls = tmp_path / "calls"
    body = f'echo x >> {calls}\necho "slurmdbd: no answer" >&2\nexit 1\n'
    tool = _script(tmp_path, "sacct", body)
    sleeps: list[float] = []
    runner = CommandRunner(retries=2, backoff_s=1.0, sleep=sleeps.append)
    with pytest.raises(SourceError) as info:
        runner.run([str(tool)], {})
    text = str(info.value)
    assert "exited with 1: slurmdbd: no answer" in text
    assert str(tool) in text
    assert "after 3 attempt(s)" in text
    assert sleeps == [1.0, 2.0]
    assert calls.read_text().count("x") == 3


def test_timeout_is_reported(tmp_path: Path):
    tool = _script(tmp_path, "slow", "sleep 5\n")
    runner = CommandRunner(timeout_s=0.2, retries=0)
    with pytest.raises(SourceError, match=r"timed out after 0\.2 s"):
        runner.run([str(tool)], {})


def test_missing_binary_is_a_clear_error():
    with pytest.raises(SourceError, match="exited with 127"):
        CommandRunner(retries=3, sleep=lambda s: None).run(["definitely-not-sacct-xyz"], {})
