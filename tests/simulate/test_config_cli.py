from pathlib import Path

import pytest

from simulator import NodeCounts, SimConfig
from simulator.cli_args import main


def test_node_counts_parse():
    assert NodeCounts.parse("hpc=1000,k8s=200,shared=50") == NodeCounts(1000, 200, 50)
    assert NodeCounts.parse("k8s=9") == NodeCounts(hpc=6, k8s=9, shared=2)
    with pytest.raises(ValueError, match="expected pool=count"):
        NodeCounts.parse("gpu=3")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"days": 0}, "expected --days >= 1, found 0"),
        ({"step_seconds": 7}, "expected --step to divide 3600"),
        ({"nodes": NodeCounts(0, 1, 1)}, "expected at least 1 hpc node, found 0"),
        ({"dcgm_label_style": "odd"}, "expected a DCGM label style"),
        ({"load": 2.0}, "expected --load between"),
    ],
)
def test_config_errors_say_what_was_expected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SimConfig(**kwargs)


def test_cli_reports_bad_values_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["--out", str(tmp_path / "w"), "--step", "7"]) == 2
    err = capsys.readouterr().err
    assert "expected --step to divide 3600" in err
    assert err.rstrip().endswith("found 7")
    with pytest.raises(SystemExit) as exc:
        main(["--out", str(tmp_path / "w"), "--nodes", "gpus=3"])
    assert exc.value.code == 2
    assert "expected pool=count" in capsys.readouterr().err


def test_window_is_utc_days():
    config = SimConfig(days=7)
    assert config.window_end - config.window_start == 7 * 86_400
    assert config.window_start % 86_400 == 0
    assert config.start.weekday() == 0  # the default start is a Monday


def test_progress_goes_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "tiny"
    assert main(["--out", str(out), "--days", "1", "--no-metrics",
                 "--nodes", "hpc=2,k8s=2,shared=1"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "[simulate] simulating 1 day(s)" in captured.err
    assert (out / "truth" / "incidents.csv").is_file()
