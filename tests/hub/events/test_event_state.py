"""The states that open events, as the judging jobs hold and release them: any number at once,
though PostgreSQL takes at most 65,535 parameters a statement."""

from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from hub.events.service import Held, held, hold, release
from tests.support import FakeClock

# Three columns a state: as one multi-row INSERT, past PostgreSQL's 65,535 parameters.
MANY = 25_000


async def test_tens_of_thousands_of_states_are_held_replaced_and_released(
    session: AsyncSession, clock: FakeClock
) -> None:
    first = clock.now
    keys = [f"prod/edge-{n:05}" for n in range(MANY)]
    await hold(session, "stale", {key: Held(first, announced=False) for key in keys})
    later = clock.advance(minutes=5)
    await hold(session, "stale", {key: Held(later, announced=True) for key in keys[::2]})
    kept = await held(session, "stale")
    await release(session, "stale", keys[: MANY - 3])
    left = await held(session, "stale")

    assert len(kept) == MANY
    assert kept[keys[0]] == Held(later, announced=True)
    assert kept[keys[1]] == Held(first, announced=False)
    assert kept[keys[-1]] == Held(later - timedelta(minutes=5), announced=False)
    assert left == {key: kept[key] for key in keys[MANY - 3 :]}
    assert await held(session, "drift") == {}
