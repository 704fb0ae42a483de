"""The store is on the backend the run says: a TimescaleDB run that fell back to plain tables
(the extension missing or not preloaded) fails here instead of passing as a plain run."""

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from tests.conftest import expected_backend

HYPERTABLES = {"status_transition", "cluster_heartbeat"}


async def test_the_store_is_on_the_backend_the_run_names(session: AsyncSession) -> None:
    extension = await session.scalar(
        text("SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'")
    )
    hypertables = set()
    if extension is not None:
        hypertables = set(
            await session.scalars(
                text("SELECT hypertable_name FROM timescaledb_information.hypertables")
            )
        )
    backend = expected_backend()
    if backend is None:  # not named: whichever it is, it is wholly that one
        backend = "timescaledb" if extension is not None else "postgresql"
    if backend == "timescaledb":
        assert extension is not None, "TimescaleDB run, but the extension is not in the store"
        assert hypertables >= HYPERTABLES
    else:
        assert extension is None, f"plain PostgreSQL run, but TimescaleDB {extension} is there"
