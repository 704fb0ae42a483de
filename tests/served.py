"""`fleetmark serve` (and other long-running commands) as a user runs them: a process of its own.

The hub listens on a free port of 127.0.0.1 with its database given by FLEETMARK_DATABASE_URL;
what it prints is kept in a file so a test can read it, and SIGTERM stops it as an
orchestrator would.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.conftest import TOKEN_SECRET

FLEETMARK = str(Path(sys.executable).parent / "fleetmark")
START_TIMEOUT = 60.0


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text()

    def stop(self) -> int:
        """SIGTERM, then the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=START_TIMEOUT)


@dataclass
class ServedHub(Running):
    url: str


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def hub_environment(database_url: str, data_dir: Path, **variables: str) -> dict[str, str]:
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("FLEETMARK_")
    }
    environment.update(
        FLEETMARK_MODE="development",
        FLEETMARK_TOKEN_SECRET=TOKEN_SECRET,
        FLEETMARK_DATABASE_URL=database_url,
        FLEETMARK_DATA_DIR=str(data_dir),
        **variables,
    )
    return environment


@contextmanager
def run(args: list[str], environment: dict[str, str], log: Path) -> Iterator[Running]:
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [FLEETMARK, *args], env=environment, stdout=sink, stderr=subprocess.STDOUT
        )
    running = Running(process, log)
    try:
        yield running
    finally:
        running.stop()


@contextmanager
def served_hub(
    environment: dict[str, str], log: Path, port: int | None = None
) -> Iterator[ServedHub]:
    """The hub served (on `port`, else a free one) until the block ends; fails with its output
    if it does not come up."""
    port = port or free_port()
    args = ["serve", "--host", "127.0.0.1", "--port", str(port), "--no-migrate"]
    with run(args, environment, log) as running:
        hub = ServedHub(running.process, log, f"http://127.0.0.1:{port}")
        wait_until_up(hub)
        yield hub


def wait_until_up(hub: ServedHub) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if hub.process.poll() is not None:
            raise AssertionError(f"the hub exited ({hub.process.returncode}):\n{hub.output()}")
        try:
            if httpx.get(f"{hub.url}/readyz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"the hub did not come up in {START_TIMEOUT} s:\n{hub.output()}")
