"""A progress bar for long CLI loops (a year's backfill is 365 windows).

On a terminal it redraws one line (``[#####.....] 120/365 days, 2.1 s each, ~8 min left``) and
prints each window's summary above it; anywhere else (CI logs, pipes) it prints one plain line per
step, so logs stay readable.
"""

import sys
import time
from typing import TextIO

WIDTH = 30


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Progress:
    """``total`` steps of ``unit``; call :meth:`start` before each step, :meth:`note` for output."""

    def __init__(self, total: int, unit: str = "days", *, stream: TextIO | None = None,
                 clock=time.monotonic) -> None:
        if total < 0:
            msg = f"expected a non-negative number of steps, found {total}"
            raise ValueError(msg)
        self.total = total
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._clock = clock
        self._began = clock()
        self.done = 0
        self._label = ""

    def bar(self) -> str:
        """The status line for the current state."""
        filled = round(WIDTH * self.done / self.total) if self.total else WIDTH
        text = f"[{'#' * filled}{'.' * (WIDTH - filled)}] {self.done}/{self.total} {self.unit}"
        if self.done:
            each = (self._clock() - self._began) / self.done
            text += f", {each:.1f} s each"
            if self.done < self.total:
                text += f", ~{_duration(each * (self.total - self.done))} left"
        return text + (f"  {self._label}" if self._label else "")

    def _draw(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + self.bar())
            self.stream.flush()

    def start(self, label: str) -> None:
        """Step ``done + 1`` begins (``label`` names it, e.g. ``sacct 2026-01-05``)."""
        self._label = label
        if self.tty:
            self._draw()
        else:
            eta = ""
            if self.done:
                each = (self._clock() - self._began) / self.done
                eta = f" (~{_duration(each * (self.total - self.done))} left)"
            print(f"[{self.done + 1}/{self.total}] {label}{eta}", file=self.stream, flush=True)

    def note(self, text: str) -> None:
        """Print ``text`` (a step's summary) without breaking the bar."""
        if self.tty:
            self.stream.write("\r\x1b[2K")
        print(text, file=self.stream, flush=True)
        self._draw()

    def advance(self) -> None:
        """The current step finished."""
        self.done = min(self.done + 1, self.total)
        self._draw()

    def finish(self) -> None:
        self._label = ""
        if self.tty:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()
