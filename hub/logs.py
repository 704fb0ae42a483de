"""structlog set-up: console lines in development, JSON in production."""

import logging
from typing import Any, Literal

import structlog

from hub.harvest.urls import redact_text

_PLAIN = (int, float, bool, type(None))


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, dict):
        return {key: _redacted(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(item) for item in value]
    # Anything else is rendered by its repr (the console and JSON renderers alike).
    shown = repr(value)
    redacted = redact_text(shown)
    return value if redacted == shown else redacted


def redact_credentials(
    _: structlog.typing.WrappedLogger, __: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """No URL credentials in any value of any event (a URL in a message, an error, a
    traceback), whoever logs it."""
    return {key: _redacted(value) for key, value in event.items()}


def configure_logging(log_format: Literal["console", "json"], level: int = logging.INFO) -> None:
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if log_format == "json"
        else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            redact_credentials,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        cache_logger_on_first_use=True,
    )
