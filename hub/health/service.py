"""Readiness: whether the store answers. The router only turns the answer into a status code."""

from sqlalchemy.exc import SQLAlchemyError

from hub.database import read_session
from hub.health import repository
from hub.types import Sessions


async def database_problem(sessionmaker: Sessions) -> str | None:
    """None when the database answers a query, else why it does not.

    The session is opened here rather than by a request dependency: a dependency that cannot
    connect would fail the request with a 500 before readiness could answer 503.
    """
    try:
        async with read_session(sessionmaker) as session:
            await repository.ping(session)
    except (SQLAlchemyError, OSError) as exc:
        return f"database unreachable: {type(exc).__name__}"
    return None
