"""Small types the hub passes around: the clock every time is read from (injected, so tests
move it), the sessionmaker background work opens its sessions with, and the units of work a
task hands a service that commits in parts."""

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

__all__ = ["Clock", "Sessions", "Units"]

Clock = Callable[[], datetime]
Sessions = async_sessionmaker[AsyncSession]
# Opens one unit of work: a session committed when its block ends, rolled back on an error.
Units = Callable[[], AbstractAsyncContextManager[AsyncSession]]
