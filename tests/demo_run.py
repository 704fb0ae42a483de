"""`fleetmark demo --fast` run as a user runs it, for the tests that read its story: a process of
its own on a free port and a data directory of its own, waited for until the story is told,
and stopped with Ctrl-C."""

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from tests.served import FLEETMARK, free_port
from tests.support import bearer

STORY_TIMEOUT = 180.0
STOP_TIMEOUT = 60.0
TOLD = "The story is told"


def environment() -> dict[str, str]:
    """The user's environment without fleetmark settings: the demo brings its own."""
    return {key: value for key, value in os.environ.items() if not key.startswith("FLEETMARK_")}


def git(repository: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repository, capture_output=True, text=True, check=True
    ).stdout.strip()


def nothing_runs_in(directory: Path) -> list[str]:
    """Command lines of the processes that name `directory` (the embedded PostgreSQL does),
    given a moment to finish exiting once stopped."""
    deadline = time.monotonic() + 10.0
    while (found := running_in(directory)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def running_in(directory: Path) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(directory) in command:
            found.append(command)
    return found


def port_is_free(port: int) -> bool:
    """Whether a server may listen on `port` (as servers do: connections the demo's hub
    closed may linger in TIME_WAIT)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Demo:
    def __init__(self, data_dir: Path, log: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        with log.open("wb") as sink:
            self.process = subprocess.Popen(
                [
                    FLEETMARK,
                    "demo",
                    "--fast",
                    "--port",
                    str(self.port),
                    "--data-dir",
                    str(data_dir),
                ],
                env=environment(),
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        self.token = ""

    def output(self) -> str:
        return self.log.read_text()

    def wait_for_story(self) -> float:
        """Seconds until the story was told."""
        started = time.monotonic()
        self.wait_for_output(TOLD)
        found = re.search(r"FLEETMARK_TOKEN=(\S+)", self.output())
        assert found is not None, self.output()
        self.token = found[1]
        return time.monotonic() - started

    def wait_for_output(self, text: str) -> None:
        started = time.monotonic()
        while text not in self.output():
            assert self.process.poll() is None, f"the demo exited:\n{self.output()}"
            assert time.monotonic() - started < STORY_TIMEOUT, self.output()
            time.sleep(0.05)

    def get(self, path: str, **params: Any) -> Any:
        response = httpx.get(
            f"{self.url}{path}", params=params, headers=bearer(self.token), timeout=10.0
        )
        assert response.status_code == 200, response.text
        return response.json()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=STOP_TIMEOUT)
