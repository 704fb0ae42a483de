"""Small types the hub passes around: the clock every time is read from (injected, so tests
move it) and the sessionmaker background work opens its sessions with."""

from collections.abc import Callable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

__all__ = ["Clock", "Sessions"]

Clock = Callable[[], datetime]
Sessions = async_sessionmaker[AsyncSession]
