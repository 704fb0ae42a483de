"""Request dependencies as Annotated aliases.

Sessions are function-scoped: their commit runs before the response is sent, so a client
never sees success for work that was not committed. Each passes the app's StoreGate first: while
the database cannot be reached, a request that needs it is answered 503 at once.
"""

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AfterValidator
from pydantic_core import PydanticCustomError
from sqlalchemy.ext.asyncio import AsyncSession

from hub.background.runner import Jobs
from hub.client.params import Text
from hub.clusters import service as clusters
from hub.clusters.repository import ClusterIdentity
from hub.database import ReadSession, StoreGate, read_session, write_session
from hub.settings import HubSettings
from hub.sorting import OWN_ORDER, Order
from hub.tokens import service as tokens
from hub.types import Clock

bearer = HTTPBearer(auto_error=False)


# Plain dependencies are async: FastAPI runs sync ones in a thread pool, a thread hop per call.
async def get_settings(request: Request) -> HubSettings:
    settings: HubSettings = request.app.state.settings
    return settings


async def get_clock(request: Request) -> Clock:
    clock: Clock = request.app.state.clock
    return clock


async def get_jobs(request: Request) -> Jobs:
    jobs: Jobs = request.app.state.jobs
    return jobs


async def _store_reachable(request: Request) -> None:
    gate: StoreGate = request.app.state.store_gate
    await gate.check()


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    await _store_reachable(request)
    async with write_session(request.app.state.sessionmaker) as session:
        yield session


async def get_read_session(request: Request) -> AsyncIterator[ReadSession]:
    await _store_reachable(request)
    async with read_session(request.app.state.sessionmaker) as session:
        yield session


SettingsDep = Annotated[HubSettings, Depends(get_settings)]
ClockDep = Annotated[Clock, Depends(get_clock)]


@dataclass(frozen=True)
class ReadContext:
    """What a read is asked against: the moment of the request, how long a cluster may be
    silent before it counts as stale, and the environments whose suspects halt promotion."""

    now: datetime
    stale_after: timedelta
    halting: Sequence[str] = ()


async def get_read_context(settings: SettingsDep, clock: ClockDep) -> ReadContext:
    return ReadContext(
        now=clock(), stale_after=settings.stale_after, halting=settings.halt_on_regression
    )


ReadContextDep = Annotated[ReadContext, Depends(get_read_context)]


async def get_public_url(request: Request, settings: SettingsDep) -> str:
    """The hub's base URL the links it answers start with, without a trailing slash:
    FLEETMARK_PUBLIC_URL, or else the one this request reached the hub at."""
    return settings.public_url or str(request.base_url).rstrip("/")


PublicUrlDep = Annotated[str, Depends(get_public_url)]
JobsDep = Annotated[Jobs, Depends(get_jobs)]
SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
ReadSessionDep = Annotated[ReadSession, Depends(get_read_session, scope="function")]
BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def _token(credentials: HTTPAuthorizationCredentials | None) -> str | None:
    return None if credentials is None else credentials.credentials


async def authenticate_cluster(
    credentials: BearerDep, session: SessionDep, settings: SettingsDep
) -> ClusterIdentity:
    return await clusters.authenticate(
        session, _token(credentials), token_secret=settings.token_secret.get_secret_value()
    )


async def require_read(
    credentials: BearerDep, session: ReadSessionDep, settings: SettingsDep
) -> None:
    await tokens.require_scope(
        session, _token(credentials), "read", token_secret=settings.token_secret.get_secret_value()
    )


async def require_admin(credentials: BearerDep, session: SessionDep, settings: SettingsDep) -> None:
    await tokens.require_scope(
        session, _token(credentials), "admin", token_secret=settings.token_secret.get_secret_value()
    )


async def require_metrics(request: Request, credentials: BearerDep, settings: SettingsDep) -> None:
    """/metrics in production, unless public: FLEETMARK_METRICS_TOKEN, checked without the
    store (so that a scrape tells of the store's outage), or a stored token of scope metrics."""
    token = _token(credentials)
    if not settings.metrics_need_token or tokens.is_configured(token, settings.metrics_token):
        return
    await _store_reachable(request)
    async with read_session(request.app.state.sessionmaker) as session:
        await tokens.require_scope(
            session, token, "metrics", token_secret=settings.token_secret.get_secret_value()
        )


ClusterTokenDep = Annotated[ClusterIdentity, Depends(authenticate_cluster)]
ReadAccess = Depends(require_read)
AdminAccess = Depends(require_admin)
MetricsAccess = Depends(require_metrics)


def sort_order(columns: Sequence[str], rows: str) -> Any:
    """The dependency reading a listing's `sort` parameter into an Order: one of `columns`,
    `-` first for descending. Any other is refused (422) naming the columns there are."""

    def known(sort: str | None) -> str | None:
        column = (sort or "").removeprefix("-")
        if column and column not in columns:
            raise PydanticCustomError(
                "sort_column",
                "no column {column} to sort by (columns: {columns})",
                {"column": repr(column), "columns": ", ".join(columns)},
            )
        return sort

    async def order(
        sort: Annotated[
            Text | None,
            AfterValidator(known),
            Query(
                description=f"Sort the {rows} by a column ({', '.join(columns)}); a leading - "
                "sorts descending. Ties, and no column, keep the listing's own order."
            ),
        ] = None,
    ) -> Order:
        if not sort:
            return OWN_ORDER
        return Order(sort.removeprefix("-"), descending=sort.startswith("-"))

    return Depends(order)
