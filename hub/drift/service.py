"""Drift: where each cluster and reconciler object stands against what it should run, why, and
for how long it has been so. The reasons are defined in docs/concepts.md, "Drift".

The drift job judges into `object_drift` and keeps `drift_period`; the API reads them, adding
staleness with the hub's clock. Why a job: docs/contributing.md ("Background jobs").
"""

import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import structlog
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession

from hub.background.pacing import Pacer
from hub.client.operations import asked
from hub.client.params import INTEGER_MAX
from hub.client.schemas.drift import DriftQuery
from hub.client.schemas.fleet import FleetQuery
from hub.client.text import format_duration
from hub.drift import repository, schemas
from hub.drift.repository import (
    DriftFilter,
    Evaluated,
    HistoryFilter,
    Listed,
    Part,
    PeriodChanges,
    Scope,
)
from hub.drift.schemas import (
    ConfigMismatch,
    Desired,
    DriftEventData,
    DriftHistory,
    DriftItem,
    DriftPeriod,
    DriftReason,
    DriftReport,
    DriftSubject,
    DriftSummary,
    EnvironmentDrift,
    ObjectRef,
    ObjectSource,
    Reason,
    StaleEventData,
)
from hub.errors import InvalidInput
from hub.events.service import Event, Held, held, hold, page_url, publish, release
from hub.gate import service as gate_service
from hub.git.urls import spelled_repository
from hub.placement import repository as placement_repository
from hub.placement import service as placement_service
from hub.revisions import UNKNOWN_FORM
from hub.sorting import OWN_ORDER, Order
from hub.text import short_sha

__all__ = [
    "COLUMNS",
    "REASONS",
    "Announcing",
    "Evaluation",
    "current_drift",
    "drift_history",
    "evaluate_drift",
]

log = structlog.get_logger("fleetmark.drift")

REASONS: tuple[str, ...] = tuple(reason.value for reason in Reason)
# The columns a drift listing sorts by.
COLUMNS = tuple(repository.DRIFT_SORTS)
_LIVE_DRIFT = {
    "argocd": "Argo CD reports the application OutOfSync",
    "flux": "Flux reports Drifted: the cluster no longer matches what it applied",
}


# --- the job ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Evaluation:
    evaluated_at: datetime
    # Whether the round judged every object, or those whose inputs changed (`judged` of them).
    full: bool
    judged: int
    # The fleet's judged objects, and its drifted ones, after the round.
    objects: int
    drifted: int
    changed: int
    periods_opened: int
    periods_closed: int
    events: int
    seconds: float


def _repositories(spellings: Sequence[str], harvested: Mapping[str, int]) -> dict[str, int]:
    """The harvested repository each URL spelling stands for; spellings of none are left out."""
    found = {}
    for spelling in spellings:
        url = spelled_repository(spelling)
        if url is not None and url in harvested:
            found[spelling] = harvested[url]
    return found


@dataclass(frozen=True, slots=True)
class Announcing:
    """How the drift job announces what it finds: the drift grace (how long a cluster's drift
    lasts before it counts), and the hub's URL (the events' source and their evidence's)."""

    grace: timedelta
    source: str


# The kinds of the states (hub.events) the drift job holds: an environment's drift, by its
# name; a drifted cluster (since when) and a stale one, by "<environment>/<cluster>".
DRIFTING = "drift"
DRIFTED = "drifted_cluster"
STALE = "stale"
# The pages that show the events' evidence (docs/pages.md): the drifted objects, and the
# clusters with their agents' last reports.
DRIFT_PAGE = "/drift"
FLEET_PAGE = "/"


def _listed(clusters: Sequence[str]) -> dict[str, Any]:
    return {"clusters": list(clusters[: schemas.LISTED_CLUSTERS]), "count": len(clusters)}


@dataclass(frozen=True, slots=True)
class _Standing:
    """The registered clusters as the evaluation left them, by environment, and the type of
    each ("<environment>/<cluster>")."""

    drifted: dict[str, list[str]]
    stale: dict[str, list[str]]
    types: dict[str, str | None]


@dataclass(slots=True)
class _Changes:
    """What an evaluation announces, and the states (by kind) to hold and to release."""

    events: list[Event] = field(default_factory=list)
    holding: dict[str, dict[str, Held]] = field(default_factory=dict)
    ended: dict[str, list[str]] = field(default_factory=dict)


def _types(standing: _Standing, environment: str, clusters: Iterable[str]) -> set[str]:
    found = (standing.types.get(f"{environment}/{cluster}") for cluster in clusters)
    return {name for name in found if name is not None}


def _drift_events(
    standing: _Standing,
    clusters_kept: Mapping[str, Held],
    kept: Mapping[str, Held],
    now: datetime,
    announcing: Announcing,
) -> _Changes:
    """Per cluster, since when it is drifted; per environment, fleetmark.drift.started once a
    cluster's drift outlived the grace (listing those that did), and .resolved once an
    announced environment has no drifted cluster left."""
    changes = _Changes(holding={DRIFTED: {}, DRIFTING: {}})
    drifting_now = set()
    for environment, clusters in standing.drifted.items():
        since = {}
        for cluster in clusters:
            key = f"{environment}/{cluster}"
            drifting_now.add(key)
            if key not in clusters_kept:
                changes.holding[DRIFTED][key] = Held(now, announced=False)
            since[cluster] = (clusters_kept.get(key) or Held(now, announced=False)).since
        outlived = [cluster for cluster in clusters if now - since[cluster] >= announcing.grace]
        state = kept.get(environment)
        if outlived and (state is None or not state.announced):
            first = min(since[cluster] for cluster in outlived)
            changes.holding[DRIFTING][environment] = Held(first, announced=True)
            data = DriftEventData(
                environment=environment,
                since=first,
                evidence_url=_drift_evidence(announcing.source, environment),
                **_listed(outlived),
            )
            changes.events.append(
                _event(
                    "fleetmark.drift.started",
                    environment,
                    "drift",
                    now,
                    data,
                    _types(standing, environment, outlived),
                )
            )
    changes.ended[DRIFTED] = sorted(clusters_kept.keys() - drifting_now)
    changes.ended[DRIFTING] = [name for name in kept if name not in standing.drifted]
    for environment in changes.ended[DRIFTING]:
        if kept[environment].announced:
            data = DriftEventData(
                environment=environment,
                since=kept[environment].since,
                evidence_url=_drift_evidence(announcing.source, environment),
                clusters=[],
                count=0,
            )
            ended = [
                key.partition("/")[2]
                for key in changes.ended[DRIFTED]
                if key.partition("/")[0] == environment
            ]
            changes.events.append(
                _event(
                    "fleetmark.drift.resolved",
                    environment,
                    "drift",
                    now,
                    data,
                    _types(standing, environment, ended),
                )
            )
    return changes


def _drift_evidence(source: str, environment: str) -> str:
    return page_url(source, DRIFT_PAGE, asked(DriftQuery, environment=environment))


def _stale_events(
    standing: _Standing,
    live: set[str],
    kept: Mapping[str, Held],
    now: datetime,
    stale_after: timedelta,
    source: str,
) -> _Changes:
    """Per environment, one fleetmark.cluster.stale listing its clusters newly stale and one
    .recovered listing those that report again; a cluster no longer in the environment is
    forgotten without either."""
    changes = _Changes(holding={STALE: {}}, ended={STALE: []})
    seconds = int(stale_after.total_seconds())

    def event(type_: str, environment: str, clusters: list[str]) -> Event:
        data = StaleEventData(
            environment=environment,
            stale_after_seconds=seconds,
            evidence_url=page_url(source, FLEET_PAGE, asked(FleetQuery, environment=environment)),
            **_listed(clusters),
        )
        types = _types(standing, environment, clusters)
        return _event(type_, environment, "clusters", now, data, types)

    stale_now = {
        f"{environment}/{c}" for environment, clusters in standing.stale.items() for c in clusters
    }
    for environment, clusters in standing.stale.items():
        newly = [c for c in clusters if f"{environment}/{c}" not in kept]
        if newly:
            changes.holding[STALE] |= {
                f"{environment}/{c}": Held(now, announced=True) for c in newly
            }
            changes.events.append(event("fleetmark.cluster.stale", environment, newly))
    recovered: dict[str, list[str]] = {}
    for key in sorted(kept.keys() - stale_now):
        environment, _, cluster = key.partition("/")
        changes.ended[STALE].append(key)
        if key in live:
            recovered.setdefault(environment, []).append(cluster)
    for environment, clusters in sorted(recovered.items()):
        changes.events.append(event("fleetmark.cluster.recovered", environment, sorted(clusters)))
    return changes


def _event(
    type_: str,
    environment: str,
    about: str,
    now: datetime,
    data: BaseModel,
    cluster_types: Iterable[str],
) -> Event:
    return Event(
        type=type_,
        subject=f"environments/{environment}/{about}",
        time=now,
        data=data.model_dump(mode="json"),
        environment=environment,
        cluster_types=sorted(cluster_types),
    )


async def _announce(
    session: AsyncSession, *, now: datetime, stale_after: timedelta, announcing: Announcing
) -> int:
    """Publish what changed in the environments' drift and the clusters' staleness since the
    last evaluation, holding what is announced (or watched through the grace) in the same
    transaction. How many events."""
    standing = _Standing(drifted={}, stale={}, types={})
    live = set()
    for row in await repository.cluster_standing(session, now - stale_after):
        key = f"{row.environment}/{row.cluster}"
        live.add(key)
        standing.types[key] = row.cluster_type
        if row.drifted:
            standing.drifted.setdefault(row.environment, []).append(row.cluster)
        if row.stale:
            standing.stale.setdefault(row.environment, []).append(row.cluster)
    drift = _drift_events(
        standing, await held(session, DRIFTED), await held(session, DRIFTING), now, announcing
    )
    stale = _stale_events(
        standing, live, await held(session, STALE), now, stale_after, announcing.source
    )
    for changes in (drift, stale):
        for kind, states in changes.holding.items():
            await hold(session, kind, states)
        for kind, keys in changes.ended.items():
            await release(session, kind, keys)
    events = drift.events + stale.events
    await publish(session, events, source=announcing.source)
    return len(events)


# A round judges the objects whose inputs changed since the last one (a report wrote them, the
# harvest moved the branches they follow, their cluster was placed or decommissioned:
# hub/drift/repository.py), and every object when the last round that did is FULL_PASS_EVERY
# old, or there is none, or the last round kept no stale-after (before migration 0061): the
# safety net for what the increments cannot see (a write that commits more than
# WRITTEN_OVERLAP, hub/placement/repository.py, after the hub's clock stamped it; a release
# that judges differently), which finds nothing when they saw it all. At 10,000
# clusters a pass over every object takes some 11 s, spread over parts with pauses; every 15
# minutes that is about 1 % of a core, where judging every object every 30 s took a third of
# one. The objects that changed are judged PART_OBJECTS at a time, paced the same way. The
# drift periods follow: of every cluster in a full pass, else of the clusters whose verdicts
# changed and those whose periods may be due a change all the same (repository.periods_due),
# PART_CLUSTERS at a time.
FULL_PASS_EVERY = timedelta(minutes=15)


def _cluster_parts(clusters: Collection[int]) -> list[list[int]]:
    """`clusters` in ascending parts of PART_CLUSTERS."""
    ordered, size = sorted(clusters), placement_repository.PART_CLUSTERS
    return [ordered[start : start + size] for start in range(0, len(ordered), size)]


async def _record_periods(
    session: AsyncSession,
    *,
    now: datetime,
    stale_before: datetime,
    parts: Sequence[Part | list[int]],
) -> PeriodChanges:
    """Bring the drift periods of the clusters in `parts` (parts of the fleet, or lists of
    ids) up to date, a part at a time with pauses between."""
    changes, pacer = PeriodChanges(opened=0, closed=0, widened=0), Pacer()
    for part in parts:
        await pacer.part()
        changes += await repository.record_periods(
            session,
            now=now,
            stale_before=stale_before,
            order=REASONS,
            clusters=part,
        )
    return changes


async def evaluate_drift(
    session: AsyncSession, *, now: datetime, stale_after: timedelta, announcing: Announcing
) -> Evaluation:
    """Judge the live objects of the registered clusters whose inputs changed since the last
    round (every one, when the last full pass is FULL_PASS_EVERY old), and bring the drift
    periods up to date, as of `now`, publishing the environments' drift and the clusters'
    staleness that changed; the caller commits. A full pass judges a part of the fleet at a
    time, with a pause between (hub/placement/repository.py), in the one transaction."""
    started = time.perf_counter()
    repositories = _repositories(
        await gate_service.source_spellings(session), await repository.repository_ids(session)
    )
    last = await repository.last_evaluation(session)
    evaluated = Evaluated(objects=0, changed=0, dropped=0, clusters=frozenset())
    stale_before = now - stale_after
    if (
        last is not None
        and last.full_at is not None
        and last.stale_after is not None
        and timedelta(0) <= now - last.full_at < FULL_PASS_EVERY
    ):
        full = False
        since = last.evaluated_at - placement_repository.WRITTEN_OVERLAP
        changed = await repository.touched(session, repositories=repositories, since=since)
        size, pacer = placement_repository.PART_OBJECTS, Pacer()
        for start in range(0, len(changed), size):
            await pacer.part()
            evaluated += await repository.evaluate(
                session,
                repositories=repositories,
                now=now,
                selection=Listed(changed[start : start + size]),
            )
        # The time before which the last round counted clusters stale, by the setting it
        # judged with: a shorter one now makes stale those that fell silent in between.
        due = await repository.periods_due(
            session, stale_before=stale_before, stale_before_then=since - last.stale_after
        )
        covered: Sequence[Part | list[int]] = _cluster_parts(evaluated.clusters | set(due))
    else:
        full = True
        fleet = [Part(*part) for part in await placement_repository.fleet_parts(session)]
        pacer = Pacer()
        for part in fleet:
            await pacer.part()
            evaluated += await repository.evaluate(
                session, repositories=repositories, now=now, selection=part
            )
        covered = fleet
    await repository.count_per_cluster(session, None if full else evaluated.clusters)
    objects, drifted = await repository.judged_totals(session)
    periods = await _record_periods(session, now=now, stale_before=stale_before, parts=covered)
    await repository.set_evaluated(session, now, full=full, stale_after=stale_after)
    events = await _announce(session, now=now, stale_after=stale_after, announcing=announcing)
    return Evaluation(
        evaluated_at=now,
        full=full,
        judged=evaluated.objects,
        objects=objects,
        drifted=drifted,
        changed=evaluated.changed + evaluated.dropped,
        periods_opened=periods.opened,
        periods_closed=periods.closed,
        events=events,
        seconds=time.perf_counter() - started,
    )


# --- scope ------------------------------------------------------------------------------------


async def _scope(
    session: AsyncSession,
    *,
    environment: str | None,
    cluster_type: str | None,
    cluster: str | None,
) -> Scope:
    environment_id = None
    if environment is not None:
        environment_id = await placement_service.environment_id(session, environment)
    cluster_type_ids = None
    if cluster_type is not None:
        cluster_type_ids = await repository.cluster_type_ids(session, cluster_type, environment_id)
        if not cluster_type_ids:
            raise await placement_service.unknown_cluster_type(session, cluster_type, environment)
    cluster_id = None
    if cluster is not None:
        cluster_id = await repository.cluster_id(session, cluster)
        if cluster_id is None:
            raise await placement_service.unknown_cluster(session, cluster)
    return Scope(environment_id, cluster_type_ids, cluster_id)


# --- current drift ----------------------------------------------------------------------------


def _short(sha: str | None) -> str:
    return short_sha(sha or "?")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _reasons(row: Mapping[str, Any], stale: bool, now: datetime) -> list[DriftReason]:
    """Each reason of a drift_object row with its evidence, in the order of Reason."""
    stored = set(row["reasons"] or ())
    branch, head = row["branch"], _short(row["head_sha"])
    found: list[DriftReason] = []
    if Reason.BEHIND in stored:
        commits, since = row["commits_behind"], row["behind_since"]
        found.append(
            DriftReason(
                reason=Reason.BEHIND,
                detail=f"applied {_short(row['applied_sha'])}, {_plural(commits, 'commit')} "
                f"behind {branch} at {head}, the oldest missing one committed "
                f"{format_duration(now - since)} ago",
                commits=commits,
                since=since,
                seconds=(now - since).total_seconds(),
            )
        )
    if Reason.DIVERGED in stored:
        found.append(
            DriftReason(
                reason=Reason.DIVERGED,
                detail=f"applied {_short(row['applied_sha'])}, which is neither {branch} at "
                f"{head} nor one of its ancestors or descendants",
            )
        )
    if Reason.UNKNOWN_REVISION in stored:
        found.append(
            DriftReason(
                reason=Reason.UNKNOWN_REVISION,
                detail=f"applied {row['applied_revision']!r}, which {UNKNOWN_FORM}"
                if row["applied_sha"] is None
                else f"applied {_short(row['applied_sha'])}, which is not in the harvested "
                f"history of {row['repository']} (yet)",
            )
        )
    if Reason.NOT_APPLIED in stored:
        found.append(
            DriftReason(
                reason=Reason.NOT_APPLIED, detail=f"has applied nothing yet; {branch} is at {head}"
            )
        )
    if Reason.FAILING in stored:
        words = ": ".join(part for part in (row["reason"], row["message"]) if part)
        found.append(
            DriftReason(
                reason=Reason.FAILING,
                detail="Ready is False" + (f" ({words})" if words else ""),
                reconciler_reason=row["reason"],
                message=row["message"],
            )
        )
    if stale:
        last_seen_at = row["last_seen_at"]
        found.append(
            DriftReason(
                reason=Reason.STALE,
                detail="registered, but its agent never reported"
                if last_seen_at is None
                else f"its agent has been silent for {format_duration(now - last_seen_at)}",
                since=last_seen_at,
                seconds=None if last_seen_at is None else (now - last_seen_at).total_seconds(),
            )
        )
    if Reason.CONFIG_MISMATCH in stored:
        mismatches = [ConfigMismatch(**item) for item in row["config_mismatches"] or ()]
        targets = ", ".join(
            f"{item.deployment_target} ({', '.join(item.keys) or 'no key'})" for item in mismatches
        )
        found.append(
            DriftReason(
                reason=Reason.CONFIG_MISMATCH,
                detail=f"platform config at the applied commit differs from {branch} at {head} "
                f"for {targets}",
                config=mismatches,
            )
        )
    if Reason.LIVE_DRIFT in stored:
        found.append(
            DriftReason(
                reason=Reason.LIVE_DRIFT,
                detail=_LIVE_DRIFT.get(row["reconciler"], "the reconciler reports live drift"),
            )
        )
    return found


def _agent(
    last_seen_at: datetime | None, stale_before: datetime
) -> Literal["reporting", "stale", "never_reported"]:
    if last_seen_at is None:
        return "never_reported"
    return "stale" if last_seen_at < stale_before else "reporting"


def _item(
    row: Mapping[str, Any], *, now: datetime, stale_before: datetime, since: datetime | None
) -> DriftItem:
    agent = _agent(row["last_seen_at"], stale_before)
    reasons = _reasons(row, agent != "reporting", now)
    has_object = row["object_id"] is not None
    return DriftItem(
        cluster=row["cluster"],
        environment=row["environment"],
        cluster_type=row["cluster_type"],
        object=ObjectRef(
            reconciler=row["reconciler"],
            kind=row["kind"],
            namespace=row["namespace"],
            name=row["name"],
        )
        if has_object
        else None,
        source=ObjectSource(url=row["source_url"], ref=row["source_ref"], path=row["source_path"])
        if has_object
        else None,
        desired=Desired(
            repository=row["repository"], branch=row["branch"], head_sha=row["head_sha"]
        )
        if row["branch"] is not None
        else None,
        revision=row["revision"],
        applied_revision=row["applied_revision"],
        applied_sha=row["applied_sha"],
        ready=row["ready"],
        suspended=row["suspended"],
        agent=agent,
        last_seen_at=row["last_seen_at"],
        drifted=bool(reasons),
        drifted_since=since if reasons else None,
        reasons=reasons,
    )


def _summary(counted: Sequence[Mapping[str, Any]]) -> DriftSummary:
    environments = [
        EnvironmentDrift(
            environment=row["environment"],
            position=row["position"],
            objects=row["rows"],
            clusters=row["clusters"],
            reasons={Reason(reason): row[reason] for reason in REASONS},
        )
        for row in counted
    ]

    def total(name: str) -> int:
        return sum(row[name] for row in counted)

    return DriftSummary(
        objects=total("rows"),
        clusters=total("clusters"),
        drifted_objects=total("drifted"),
        drifted_clusters=total("drifted_clusters"),
        reasons={Reason(reason): total(reason) for reason in REASONS},
        environments=environments,
        untracked=total("untracked"),
    )


async def end_open_periods(session: AsyncSession, cluster_id: int, now: datetime) -> None:
    """End a cluster's open drift periods at `now`: it was placed elsewhere."""
    await repository.end_open_periods(session, cluster_id, now)


async def drift_summary(
    session: AsyncSession, *, now: datetime, stale_after: timedelta
) -> DriftSummary:
    """The counts of every registered cluster's drift, as `current_drift` without filters
    counts them (the fleet gauges of /metrics)."""
    criteria = DriftFilter(scope=Scope(), stale_before=now - stale_after)
    listing = await repository.drift_listing(session, criteria, limit=0, offset=0)
    return _summary(listing.counts)


async def current_drift(
    session: AsyncSession,
    *,
    environment: str | None,
    cluster_type: str | None,
    cluster: str | None,
    reasons: Sequence[str] | None,
    include_in_sync: bool,
    limit: int,
    offset: int,
    now: datetime,
    stale_after: timedelta,
    order: Order = OWN_ORDER,
) -> DriftReport:
    """The drifted objects (with `include_in_sync`, every object) of the registered clusters
    that match the filters, a page of them in `order` with every reason and its evidence, and
    counts."""
    scope = await _scope(
        session, environment=environment, cluster_type=cluster_type, cluster=cluster
    )
    stale_before = now - stale_after
    criteria = DriftFilter(
        scope=scope,
        stale_before=stale_before,
        reasons=None if not reasons else [str(reason) for reason in reasons],
        include_in_sync=include_in_sync,
    )
    if order.column is not None:
        # The counts with every cluster that has rows listed, then their rows sorted.
        listing = await repository.drift_listing(session, criteria, limit=INTEGER_MAX, offset=0)
        rows = list(
            await repository.sorted_rows(
                session,
                criteria,
                [cluster.id for cluster in listing.page],
                order,
                limit=limit,
                offset=offset,
            )
        )
    else:
        listing = await repository.drift_listing(session, criteria, limit=limit, offset=offset)
        rows = []
        if listing.page:
            listed = await repository.drift_rows(
                session, criteria, [item.id for item in listing.page]
            )
            skip = offset - listing.page[0].before
            rows = list(listed[skip : skip + limit])
    summary = _summary(listing.counts)
    object_ids = [row["object_id"] for row in rows if row["object_id"] is not None]
    cluster_ids = [row["cluster_id"] for row in rows if row["object_id"] is None]
    objects_since, clusters_since = await repository.open_since(session, object_ids, cluster_ids)
    items = [
        _item(
            row,
            now=now,
            stale_before=stale_before,
            since=clusters_since.get(row["cluster_id"])
            if row["object_id"] is None
            else objects_since.get(row["object_id"]),
        )
        for row in rows
    ]
    return DriftReport(
        evaluated_at=await repository.evaluated_at(session),
        now=now,
        stale_after_seconds=int(stale_after.total_seconds()),
        summary=summary,
        items=items,
        total=summary.objects,
        limit=limit,
        offset=offset,
    )


# --- history ----------------------------------------------------------------------------------


async def drift_history(
    session: AsyncSession,
    *,
    environment: str | None,
    cluster_type: str | None,
    cluster: str | None,
    level: Literal["cluster", "object"],
    since: datetime | None,
    until: datetime | None,
    open_only: bool,
    limit: int,
    offset: int,
    now: datetime,
) -> DriftHistory:
    """Clusters (or objects) that were drifted within [since, until), with their periods and
    the time they were drifted in that range."""
    end = now if until is None else until
    if since is not None and since >= end:
        raise InvalidInput(f"since: {since.isoformat()} is not before until {end.isoformat()}")
    scope = await _scope(
        session, environment=environment, cluster_type=cluster_type, cluster=cluster
    )
    criteria = HistoryFilter(
        scope=scope,
        objects=level == "object",
        since=since,
        until=until,
        now=now,
        open_only=open_only,
    )
    subjects = await repository.history_subjects(session, criteria, limit=limit, offset=offset)
    total = await repository.history_total(session, criteria)
    periods: dict[tuple[int, int | None], list[DriftPeriod]] = {}
    for row in await repository.history_periods(
        session, criteria, [(row["cluster_id"], row["object_id"]) for row in subjects]
    ):
        ended_at = row["ended_at"]
        periods.setdefault((row["cluster_id"], row["object_id"]), []).append(
            DriftPeriod(
                started_at=row["started_at"],
                ended_at=ended_at,
                seconds=((ended_at or now) - row["started_at"]).total_seconds(),
                reasons=[Reason(reason) for reason in row["reasons"]],
            )
        )
    items = [
        DriftSubject(
            cluster=row["cluster"],
            environment=row["environment"],
            cluster_type=row["cluster_type"],
            object=None
            if row["object_id"] is None
            else ObjectRef(
                reconciler=row["reconciler"],
                kind=row["kind"],
                namespace=row["namespace"],
                name=row["name"],
            ),
            drifted_seconds=float(row["drifted_seconds"]),
            open=row["open"],
            periods=periods.get((row["cluster_id"], row["object_id"]), []),
        )
        for row in subjects
    ]
    return DriftHistory(
        now=now,
        since=since,
        until=end,
        level=level,
        items=items,
        total=total,
        limit=limit,
        offset=offset,
    )
