"""How a job that works in parts leaves the cores to ingest between them.

A round that judges thousands of objects or clusters (the drift evaluation, the env diff
summary) does so a part at a time, in statements of a few hundredths of a second of a core, and
pauses between parts: as long as the last part took, times PART_REST, and PART_PACE at least.
So a job takes no more than about half a core however much changed, two jobs running together
about one, and reports queued behind a part are answered during the pause.
"""

import asyncio
import time

__all__ = ["PART_PACE", "PART_REST", "Pacer"]

# The shortest pause between parts, in seconds.
PART_PACE = 0.05
# The pause after a part, as a multiple of the time it took.
PART_REST = 1.0


class Pacer:
    """Call part() before each part of a round: it pauses before every part but the first."""

    def __init__(self) -> None:
        self._started: float | None = None

    async def part(self) -> None:
        if self._started is not None:
            took = time.monotonic() - self._started
            await asyncio.sleep(max(PART_PACE, took * PART_REST))
        self._started = time.monotonic()
