"""A periodic task as a slice declares it: its name (the one its runs are recorded and alerted
under), how often it runs, whether it runs at all, the coroutine that does one round, and the
advisory lock the round runs under. The runner takes the lock; a round opens its own units of
work (docs/contributing.md, "Background jobs")."""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from hub.settings import HubSettings
from hub.types import Clock, Sessions

__all__ = ["Task"]


def _always(settings: HubSettings) -> bool:
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    name: str
    run: Callable[[Sessions, HubSettings, Clock], Awaitable[object]]
    interval: Callable[[HubSettings], timedelta]
    # The key of the PostgreSQL advisory lock a round runs under.
    lock: int
    # The event logged when another replica holds the lock, and this one skips its round.
    skipped: str
    enabled: Callable[[HubSettings], bool] = _always
    # The first round at start, not one interval away.
    first_run_at_start: bool = False
    # Its kept results expect the clusters in service where they are placed: it runs at once
    # after a decommissioning or a placement.
    follows_placement: bool = False
