"""The hub's log lines carry no URL credentials, whichever value of an event holds them."""

import json
from collections.abc import Callable
from typing import Literal

import pytest
import structlog

from hub.logs import configure_logging

TOKEN = "ghp_L0ggedT0kenValue"


@pytest.fixture
def logged(stdout_logs: None, capsys: pytest.CaptureFixture[str]) -> Callable[[str], str]:
    """Logs one event of each shape in the given format; the output."""

    def log(log_format: Literal["console", "json"]) -> str:
        configure_logging(log_format)
        log = structlog.get_logger("fleetmark.test")
        log.warning(
            f"cloning https://{TOKEN}@github.com/contoso/app.git",
            url=f"https://x-access-token:{TOKEN}@github.com/contoso/app.git",
            ssh=f"ssh://git:{TOKEN}@github.com/contoso/app.git",
            nested={"urls": [f"http://{TOKEN}@git.internal/a"]},
            error=ValueError(f"unable to access 'https://{TOKEN}@github.com/contoso/app.git/'"),
        )
        try:
            raise RuntimeError(f"fetching https://{TOKEN}@github.com/contoso/app.git")
        except RuntimeError:
            log.exception("harvest failed")
        return capsys.readouterr().out

    return log


def test_json_lines_hold_no_credentials(logged: Callable[[str], str]) -> None:
    first, second = (json.loads(line) for line in logged("json").splitlines())

    assert first["event"] == "cloning https://github.com/contoso/app.git"
    assert first["url"] == "https://github.com/contoso/app.git"
    assert first["ssh"] == "ssh://git@github.com/contoso/app.git"
    assert first["nested"] == {"urls": ["http://git.internal/a"]}
    assert (
        first["error"] == "ValueError(\"unable to access 'https://github.com/contoso/app.git/'\")"
    )
    assert "RuntimeError: fetching https://github.com/contoso/app.git" in second["exception"]
    assert TOKEN not in json.dumps([first, second])


def test_console_lines_hold_no_credentials(logged: Callable[[str], str]) -> None:
    output = logged("console")

    assert "cloning https://github.com/contoso/app.git" in output
    assert TOKEN not in output
