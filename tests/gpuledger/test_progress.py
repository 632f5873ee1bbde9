"""The CLI progress bar: a redrawn line on a terminal, plain lines in logs."""

import io

import pytest

from gpuledger.ingest.progress import Progress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_with_time_left_when_not_a_terminal():
    out, clock = io.StringIO(), Clock()
    p = Progress(4, stream=out, clock=clock)
    for day in range(4):
        p.start(f"sacct 2026-01-0{day + 1}")
        p.note("  12 runs")
        clock.now += 3.0
        p.advance()
    p.finish()
    lines = out.getvalue().splitlines()
    assert lines[0] == "[1/4] sacct 2026-01-01"
    assert lines[2] == "[2/4] sacct 2026-01-02 (~9 s left)"
    assert lines[6] == "[4/4] sacct 2026-01-04 (~3 s left)"
    assert "\r" not in out.getvalue()


def test_bar_is_redrawn_in_place_on_a_terminal():
    out, clock = Tty(), Clock()
    p = Progress(10, stream=out, clock=clock)
    p.start("prometheus 2026-01-01")
    clock.now += 2.0
    p.advance()
    assert p.bar() == ("[###...........................] 1/10 days, 2.0 s each, ~18 s left"
                       "  prometheus 2026-01-01")
    p.note("summary")
    text = out.getvalue()
    assert "\r\x1b[2Ksummary\n" in text  # the summary clears the bar, then it is redrawn
    assert text.endswith(p.bar())


def test_long_runs_show_minutes_and_hours():
    clock = Clock()
    p = Progress(365, stream=io.StringIO(), clock=clock)
    clock.now += 20.0
    p.done = 1
    assert "~2.0 h left" in p.bar()
    p.done = 360
    clock.now = 100.0 + 360 * 20
    assert "~2 min left" in p.bar()


def test_negative_total_is_refused():
    with pytest.raises(ValueError, match="expected a non-negative number of steps, found -1"):
        Progress(-1)
