"""Processes the test bed starts, and only those: each is stopped through the handle that started it."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the forked child only calls it


def _die_with_parent() -> None:
    # A killed test run takes the components it started with it (not the shims: they detach on purpose).
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Process:
    """One started component: its output goes to a log file; stop() signals its own PID (TERM, then KILL)."""

    def __init__(self, name: str, argv: list[str], log: Path, env: dict[str, str] | None = None):
        self.name, self.argv, self.log = name, argv, log
        with log.open("ab") as out:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, timeout: float = 15) -> None:
        if self.popen.poll() is not None:
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(
    what: str, ready: Callable[[], bool], timeout: float, watched: Sequence[Process] = (), interval: float = 0.1
) -> float:
    """Poll ready() every ``interval`` seconds until it holds; fail early, with the log, when a watched process has
    exited."""
    started = time.monotonic()
    while True:
        for process in watched:
            if not process.running():
                raise RuntimeError(f"{process.name} exited while waiting for {what}:\n{process.log_tail()}")
        try:
            if ready():
                return time.monotonic() - started
        except OSError:
            pass
        if time.monotonic() - started > timeout:
            logs = "\n".join(f"--- {p.name}\n{p.log_tail()}" for p in watched)
            raise TimeoutError(f"{what} not ready after {timeout:.0f} s\n{logs}")
        time.sleep(interval)


def processes_matching(*needles: str) -> list[int]:
    """PIDs whose command line contains every needle (the shims a containerd left behind, say)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if all(needle in cmdline for needle in needles):
            found.append(int(entry.name))
    return found


def kill_matching(*needles: str, timeout: float = 10) -> None:
    pids = processes_matching(*needles)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
        time.sleep(0.1)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
