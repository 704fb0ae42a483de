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
    assert result.exit_code == 2
    assert "(or FLEETMARK_TOKEN_SECRET_FILE to a file holding it)" in result.output


def test_secrets_are_read_from_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("s" * 40 + "\n")
    (tmp_path / "url").write_text("\npostgresql://hub:pw@db/fleetmark\n\n")
    (tmp_path / "metrics").write_text("m" * 32)
    for name in ("TOKEN_SECRET", "DATABASE_URL", "METRICS_TOKEN"):
        monkeypatch.delenv(f"FLEETMARK_{name}", raising=False)
    monkeypatch.setenv("FLEETMARK_TOKEN_SECRET_FILE", str(tmp_path / "secret"))
    monkeypatch.setenv("FLEETMARK_DATABASE_URL_FILE", str(tmp_path / "url"))
    monkeypatch.setenv("FLEETMARK_METRICS_TOKEN_FILE", str(tmp_path / "metrics"))

    settings = HubSettings(mode="production")

    assert settings.token_secret.get_secret_value() == "s" * 40
    assert settings.database_url is not None
    assert settings.database_url.get_secret_value() == "postgresql://hub:pw@db/fleetmark"
    assert settings.metrics_token is not None
    assert settings.metrics_token.get_secret_value() == "m" * 32


def test_a_secret_given_twice_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("s" * 40)

    with pytest.raises(ValidationError, match="FLEETMARK_TOKEN_SECRET and FLEETMARK_TOKEN_SECRET_"):
        HubSettings(token_secret="t" * 40, token_secret_file=tmp_path / "secret")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"hunter2-first\nhunter2-second\n", "holds 2 lines"),
        (b"\n  \n", "is empty"),
        (b"\xff\xfehunter2", "is not UTF-8 text"),
        (None, "cannot be read (No such file or directory)"),
    ],
)
def test_an_unusable_secret_file_is_refused_by_name_without_its_content(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: bytes | None, problem: str
) -> None:
    path = tmp_path / "database-url"
    if content is not None:
        path.write_bytes(content)
    monkeypatch.setenv("FLEETMARK_MODE", "development")
    monkeypatch.delenv("FLEETMARK_DATABASE_URL", raising=False)
    monkeypatch.setenv("FLEETMARK_DATABASE_URL_FILE", str(path))

    result = CliRunner().invoke(app, ["clusters", "list", "--data-dir", str(tmp_path)])

    assert result.exit_code == 2
    assert f"FLEETMARK_DATABASE_URL_FILE {path}: {problem}" in result.stderr
    assert "hunter2" not in result.output


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


def test_the_cli_names_a_bad_setting_and_its_rule(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FLEETMARK_MODE", "development")
    monkeypatch.setenv("FLEETMARK_STALE_AFTER_SECONDS", "0")

    # On the hub's host, on its database: the settings are the hub's.
    result = CliRunner().invoke(app, ["clusters", "list", "--data-dir", str(tmp_path)])

    assert result.exit_code == 2
    assert result.stderr.strip() == "error: FLEETMARK_STALE_AFTER_SECONDS: must be greater than 0"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("https://fleetmark.example.com", "https://fleetmark.example.com"),
        ("https://fleetmark.example.com/", "https://fleetmark.example.com"),
        ("http://10.0.0.5:8080/fleetmark/", "http://10.0.0.5:8080/fleetmark"),
    ],
)
def test_the_public_url_is_a_base_without_a_trailing_slash(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: str
) -> None:
    monkeypatch.setenv("FLEETMARK_PUBLIC_URL", value)
    assert HubSettings().public_url == expected


def test_without_a_public_url_links_start_where_the_request_came_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FLEETMARK_PUBLIC_URL", raising=False)
    assert HubSettings().public_url is None


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("fleetmark.example.com", "must be an http:// or https:// URL with a host"),
        ("ftp://fleetmark.example.com", "must be an http:// or https:// URL with a host"),
        ("https://", "must be an http:// or https:// URL with a host"),
        ("https://fleetmark.example.com:http", "not a URL"),
        ("https://admin:s3cret@fleetmark.example.com", "must hold no user, query or fragment"),
        ("https://fleetmark.example.com/?next=1", "must hold no user, query or fragment"),
    ],
)
def test_the_cli_names_an_unusable_public_url_and_its_rule(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str, rule: str
) -> None:
    monkeypatch.setenv("FLEETMARK_MODE", "development")
    monkeypatch.setenv("FLEETMARK_PUBLIC_URL", value)

    result = CliRunner().invoke(app, ["clusters", "list", "--data-dir", str(tmp_path)])

    assert result.exit_code == 2
    assert rule in result.stderr
    assert result.stderr.startswith("error: FLEETMARK_PUBLIC_URL: ")
    assert "s3cret" not in result.stderr
