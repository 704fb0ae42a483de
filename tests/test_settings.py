"""Settings: default secrets refused outside development; durations as people write them."""

from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from hub.cli import app
from hub.settings import HubSettings


def test_development_mode_accepts_the_default_secret() -> None:
    assert HubSettings(mode="development").mode == "development"


def test_production_refuses_the_default_secret() -> None:
    with pytest.raises(ValidationError, match="FLEETMARK_TOKEN_SECRET must be set"):
        HubSettings(mode="production")


def test_production_refuses_a_short_secret() -> None:
    with pytest.raises(ValidationError, match="at least 32 characters"):
        HubSettings(mode="production", token_secret="too-short")


def test_production_takes_a_secret_of_its_own() -> None:
    settings = HubSettings(mode="production", token_secret="x" * 40)
    assert settings.effective_log_format == "json"


def test_the_cli_names_the_missing_secret(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FLEETMARK_MODE", "production")
    monkeypatch.delenv("FLEETMARK_TOKEN_SECRET", raising=False)
    # On the hub's host, on its database: the settings are the hub's.
    result = CliRunner().invoke(app, ["clusters", "list", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "FLEETMARK_TOKEN_SECRET" in result.output


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("300", timedelta(minutes=5)),
        ("PT5M", timedelta(minutes=5)),
        ("2.5", timedelta(seconds=2.5)),
    ],
)
def test_intervals_take_seconds_or_iso_8601(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: timedelta
) -> None:
    monkeypatch.setenv("FLEETMARK_HARVEST_INTERVAL", value)
    monkeypatch.setenv("FLEETMARK_SCHEDULE_INTERVAL", value)
    settings = HubSettings()
    assert (settings.harvest_interval, settings.schedule_interval) == (expected, expected)


@pytest.mark.parametrize("value", ["0", "-5", "soon"])
def test_an_unusable_interval_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("FLEETMARK_HARVEST_INTERVAL", value)
    with pytest.raises(ValidationError, match="harvest_interval"):
        HubSettings()


def test_a_template_render_has_two_seconds_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FLEETMARK_TEMPLATE_RENDER_TIMEOUT", raising=False)
    assert HubSettings().template_render_timeout == 2.0
    monkeypatch.setenv("FLEETMARK_TEMPLATE_RENDER_TIMEOUT", "0.5")
    assert HubSettings().template_render_timeout == 0.5


@pytest.mark.parametrize(
    "name", ["request_header_timeout", "request_body_timeout", "template_render_timeout"]
)
@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_an_unusable_timeout_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(f"FLEETMARK_{name.upper()}", value)
    with pytest.raises(ValidationError, match=name):
        HubSettings()
