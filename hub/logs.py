"""structlog set-up: console lines in development, JSON in production.

In JSON mode the standard library's log records (uvicorn's own lines, an unhandled exception's
traceback among them, and any library's warnings) are rendered by the same processors, so
that every line the hub writes is one JSON object.
"""

import logging
import sys
from typing import Any, Literal

import structlog

from hub.git.urls import redact_text

# uvicorn's loggers: its start and stop, an unhandled exception in the app, the access log.
_UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")
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
    shared: list[structlog.typing.Processor] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            *shared,
            structlog.processors.format_exc_info,
            redact_credentials,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        cache_logger_on_first_use=True,
    )
    if log_format == "json":
        _render_standard_logging(shared, renderer, level)


def _render_standard_logging(
    shared: list[structlog.typing.Processor], renderer: structlog.typing.Processor, level: int
) -> None:
    """The root logger's one handler renders as structlog does, onto structlog's stream;
    uvicorn's loggers lose the handlers uvicorn gave them (when it set up its logging) and
    pass their records up to it."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                redact_credentials,
                renderer,
            ],
        )
    )
    logging.root.handlers = [handler]
    logging.getLogger("uvicorn").setLevel(level)
    for name in _UVICORN_LOGGERS:
        logger = logging.getLogger(name)
        # A logger uvicorn turned off (the access log, unless asked for) has no handler.
        if logger.handlers:
            logger.handlers = []
            logger.propagate = True
