"""Building blocks shared by the tests: the hub's clock, agent reports, and reading the store."""

import asyncio
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import HTTPServer
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import RowMapping, select, text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from hub.models import (
    AgentSession,
    Cluster,
    ClusterHeartbeat,
    ObjectState,
    SnapshotPart,
    status_transition,
)
from hub.placement.repository import WRITTEN_OVERLAP

# A time well inside a heartbeat bucket (12:00-12:05), so bucket arithmetic is visible.
START = datetime(2026, 11, 22, 12, 2, 30, tzinfo=UTC)

SHA_A = "1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c"
SHA_B = "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3"
SHA_C = "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"
DIGEST = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
PLATFORM_REPO = "https://github.com/contoso/platform-gitops"


class FakeClock:
    """The hub's clock, moved by the test instead of by time."""

    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


def past_the_overlap(clock: FakeClock) -> None:
    """Move past a job round's overlap: what was written before lies outside the next round's."""
    clock.advance(seconds=(WRITTEN_OVERLAP + timedelta(minutes=1)).total_seconds())


# Samples of a scrape: (metric, labels) -> value.
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    """Every sample of a Prometheus text exposition, parsed by prometheus_client."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@contextmanager
def serving_in_thread(server: HTTPServer, poll_interval: float = 0.05) -> Iterator[None]:
    """`server` answering from a thread of its own until the block ends, then closed (the
    thread sees the shutdown within `poll_interval` seconds)."""
    thread = threading.Thread(target=server.serve_forever, args=(poll_interval,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def kustomization(name: str, revision: str = f"dev@sha1:{SHA_A}", **fields: Any) -> dict[str, Any]:
    """A Flux Kustomization record as the agent maps it; fields override any attribute."""
    record: dict[str, Any] = {
        "reconciler": "flux",
        "kind": "Kustomization",
        "namespace": "flux-system",
        "name": name,
        "source": {"url": PLATFORM_REPO, "ref": "dev", "path": f"drone/{name}"},
        "applied_revision": revision,
        "attempted_revision": revision,
        "ready": True,
        "reason": "ReconciliationSucceeded",
        "message": f"Applied revision: {revision}",
        "health": "Healthy",
        "drifted": False,
        "suspended": False,
    }
    record.update(fields)
    return record


def report(
    cluster: str,
    *,
    sequence: int,
    observed_at: datetime,
    objects: Iterable[Mapping[str, Any]] = (),
    boot_id: str = "boot-1",
    full_snapshot: bool = False,
    environment: str | None = None,
    cluster_type: str | None = None,
    skipped_kinds: Iterable[Mapping[str, str]] = (),
    snapshot_part: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A contract-v1 report body."""
    identity: dict[str, Any] = {"name": cluster, "labels": {"region": "east-us"}}
    if environment is not None:
        identity["environment"] = environment
    if cluster_type is not None:
        identity["cluster_type"] = cluster_type
    body: dict[str, Any] = {
        "schema": "fleetmark.report/v1",
        "cluster": identity,
        "agent": {"version": "0.1.0", "boot_id": boot_id, "instance": "fleetmark-agent-7d9f"},
        "sequence": sequence,
        "observed_at": observed_at.isoformat(),
        "full_snapshot": full_snapshot,
        "objects": list(objects),
        "skipped_kinds": list(skipped_kinds),
    }
    if snapshot_part is not None:
        body["snapshot_part"] = dict(snapshot_part)
    return body


@dataclass
class Agent:
    """Posts reports for one cluster the way its agent would: own token, boot id, sequence."""

    client: httpx.AsyncClient
    clock: FakeClock
    cluster: str
    token: str
    boot_id: str = "boot-1"
    sequence: int = 0

    async def send(
        self,
        objects: Iterable[Mapping[str, Any]] = (),
        *,
        sequence: int | None = None,
        observed_at: datetime | None = None,
        full_snapshot: bool = False,
        skipped_kinds: Iterable[Mapping[str, str]] = (),
        snapshot_part: Mapping[str, Any] | None = None,
        **identity: str,
    ) -> httpx.Response:
        if sequence is None:
            self.sequence += 1
            sequence = self.sequence
        body = report(
            self.cluster,
            sequence=sequence,
            observed_at=self.clock.now if observed_at is None else observed_at,
            objects=objects,
            boot_id=self.boot_id,
            full_snapshot=full_snapshot,
            skipped_kinds=skipped_kinds,
            snapshot_part=snapshot_part,
            **identity,
        )
        return await self.client.post("/api/v1/reports", json=body, headers=bearer(self.token))

    async def send_ok(
        self, objects: Iterable[Mapping[str, Any]] = (), **options: Any
    ) -> dict[str, Any]:
        """send(), asserting the hub accepted the report; returns the reply."""
        response = await self.send(objects, **options)
        assert response.status_code == 200, response.text
        reply: dict[str, Any] = response.json()
        return reply


class Store:
    """Reads what ingest left in the database, the way a dashboard or a query would see it."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def _cluster_id(self, cluster: str) -> int:
        cluster_id = await self.session.scalar(select(Cluster.id).where(Cluster.name == cluster))
        assert cluster_id is not None, f"no cluster {cluster!r}"
        return cluster_id

    async def cluster(self, cluster: str) -> RowMapping:
        statement = select(Cluster.__table__).where(Cluster.name == cluster)
        return (await self.session.execute(statement)).mappings().one()

    async def objects(self, cluster: str) -> dict[str, RowMapping]:
        """Current state by object name, removed objects included."""
        statement = select(ObjectState.__table__).where(
            ObjectState.cluster_id == await self._cluster_id(cluster)
        )
        rows = (await self.session.execute(statement)).mappings().all()
        return {row["name"]: row for row in rows}

    async def transitions(self, cluster: str) -> list[dict[str, Any]]:
        """Every recorded transition with its object's name, oldest first."""
        statement = (
            select(status_transition, ObjectState.name)
            .join(ObjectState, ObjectState.id == status_transition.c.object_id)
            .where(status_transition.c.cluster_id == await self._cluster_id(cluster))
            .order_by(status_transition.c.observed_at, ObjectState.name)
        )
        return [dict(row) for row in (await self.session.execute(statement)).mappings()]

    async def agent_sessions(self, cluster: str) -> dict[str, RowMapping]:
        statement = select(AgentSession.__table__).where(
            AgentSession.cluster_id == await self._cluster_id(cluster)
        )
        rows = (await self.session.execute(statement)).mappings().all()
        return {row["boot_id"]: row for row in rows}

    async def heartbeats(self, cluster: str) -> list[RowMapping]:
        statement = (
            select(ClusterHeartbeat.__table__)
            .where(ClusterHeartbeat.cluster_id == await self._cluster_id(cluster))
            .order_by(ClusterHeartbeat.bucket_at)
        )
        return list((await self.session.execute(statement)).mappings().all())

    async def snapshot_parts(self, cluster: str) -> list[tuple[str, int]]:
        """(snapshot id, part index) of the parts the hub keeps for a snapshot still open."""
        statement = (
            select(SnapshotPart.snapshot_id, SnapshotPart.part_index)
            .where(SnapshotPart.cluster_id == await self._cluster_id(cluster))
            .order_by(SnapshotPart.snapshot_id, SnapshotPart.part_index)
        )
        return [(row.snapshot_id, row.part_index) for row in await self.session.execute(statement)]


async def blocked_backends(database_url: str, count: int) -> None:
    """Wait until `count` of the hub's connections are blocked on a lock."""
    query = text(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE application_name = 'fleetmark-hub' AND wait_event_type = 'Lock'"
    )
    engine = create_async_engine(database_url)
    try:
        async with asyncio.timeout(10):
            while True:
                async with engine.connect() as connection:
                    if (await connection.execute(query)).scalar_one() >= count:
                        return
                await asyncio.sleep(0.01)
    finally:
        await engine.dispose()
