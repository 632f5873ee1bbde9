"""Run Slurm's accounting commands on this host or through a command prefix (``ssh login``).

Times out, retries transient failures with backoff, and on failure raises a ``SourceError`` that
names the command and quotes its stderr, so nothing is written for that window.
"""

import os
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from connectors.errors import SourceError


@dataclass(frozen=True)
class CommandRunner:
    """How to run a Slurm client command: optional prefix, timeout and retries."""

    prefix: tuple[str, ...] = ()
    timeout_s: float = 300.0
    retries: int = 2
    backoff_s: float = 2.0
    sleep: Callable[[float], None] = time.sleep

    @classmethod
    def from_prefix(cls, prefix: str = "", **kwargs: object) -> "CommandRunner":
        return cls(prefix=tuple(shlex.split(prefix)), **kwargs)  # type: ignore[arg-type]

    def argv(self, command: Sequence[str], environment: dict[str, str]) -> list[str]:
        """The full argument list; the environment travels as ``env K=V`` so it survives ssh."""
        inner = ["env", *(f"{k}={v}" for k, v in sorted(environment.items())), *command]
        if not self.prefix:
            return inner
        return [*self.prefix, shlex.join(inner)]

    def run(self, command: Sequence[str], environment: dict[str, str]) -> str:
        argv = self.argv(command, environment)
        shown = shlex.join(argv)
        last_error = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                done = subprocess.run(
                    argv,
                    capture_output=True,
                    timeout=self.timeout_s,
                    check=False,
                    env={**os.environ, "LC_ALL": "C.UTF-8"},
                )
            except FileNotFoundError as exc:
                msg = f"`{shown}` could not start: expected {argv[0]!r} on PATH, found none"
                raise SourceError(msg) from exc
            except subprocess.TimeoutExpired:
                last_error = f"`{shown}` timed out after {self.timeout_s:g} s"
                continue
            stderr = done.stderr.decode("utf-8", "replace").strip()
            if done.returncode == 0:
                return done.stdout.decode("utf-8", "replace")
            last_error = f"`{shown}` exited with {done.returncode}: {stderr or '(no stderr)'}"
            if done.returncode == 127 or "command not found" in stderr:
                break  # a missing binary will not appear on retry
        msg = f"{last_error} (after {attempt + 1} attempt(s))"
        raise SourceError(msg)
