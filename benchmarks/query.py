"""Query benchmark: the read endpoints over a generated store of 10,000 clusters and 90 days.

The generated fleet and the figures are in docs/benchmarks.md ("Query"). Adding an endpoint
is one line in `endpoints()`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import inspect
import itertools
import json
import os
import random
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib.resources import files
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg

# The ingest benchmark's helpers: the hub as a process, the scratch database, the figures.
from ingest import (
    PROTECTED_DATABASES,
    Hub,
    backend_cpu,
    busy_seconds,
    cumulative_cpu,
    database_name,
    fleetmark_executable,
    free_port,
    mib,
    percentile,
    phase,
    rss_bytes,
    server_facts,
    timescaledb_server,
    uss_bytes,
    with_database,
)
from psycopg import sql
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from hub import migrate
from hub.client.text import format_duration
from hub.database import create_sessionmaker, normalise_database_url, write_session
from hub.dora.service import refresh_rollup
from hub.drift.service import FULL_PASS_EVERY
from hub.drift.tasks import scheduled_drift
from hub.envdiff.service import FULL_PASS_EVERY as ENV_DIFF_FULL_PASS_EVERY
from hub.envdiff.service import keep_diff
from hub.envdiff.tasks import refresh_deployed
from hub.rollouts.tasks import scheduled_rollouts
from hub.settings import HubSettings
from hub.timeline.tasks import READINESS_INTERVAL, keep_readiness

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/fleetmark_bench_query"
# What a kept store was generated with, in its database's comment: reused only when equal
# (and when the migrations it was upgraded with are unchanged).
MARKER = "fleetmark-query-benchmark"
TARGET_MS = 50.0
# The timeline merges several histories: its first page of the last hour within this.
TIMELINE_TARGET_MS = 200.0
# The built-in pages: loaded in a second.
PAGE_TARGET_MS = 1000.0
# The suspects judge every change and regression of an environment's period, asked during an
# incident or by the halts job each minute: within a second, as a page.
SUSPECTS_TARGET_MS = 1000.0
TARGET_RSS = 300 * 2**20
SEED = 20261123

# --- the fleet --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TypeSpec:
    name: str
    share: float  # of the environment's clusters
    reconciler: str  # flux or argocd
    labels: dict[str, str]
    # How this cluster type's reconcilers spell the platform repository's URL.
    platform_url: str


_PLATFORM = "github.com/contoso/platform-gitops"
_DRONE = {"region": "east-us", "restricted": "true", "edge": "true"}
_CENTER = {"region": "east-us", "restricted": "true"}
_LARGE = {"region": "west-us", "size": "large"}
_SMALL = {"region": "west-us", "size": "small"}
_SSH, _HTTPS = f"ssh://git@{_PLATFORM}.git", f"https://{_PLATFORM}.git"
_SCP, _ARGO = f"git@{_PLATFORM.replace('/', ':', 1)}.git", f"https://{_PLATFORM}/"
# name, share of all clusters, its deployment target, its cluster types (as in the scenario)
ENVIRONMENTS: list[tuple[str, float, str, list[TypeSpec]]] = [
    ("dev", 0.10, "functional-test", [
        TypeSpec("drone", 0.40, "flux", _DRONE, _SSH),
        TypeSpec("command-center", 0.10, "flux", _CENTER, _HTTPS),
        TypeSpec("large", 0.25, "argocd", _LARGE, _ARGO),
        TypeSpec("small", 0.25, "flux", _SMALL, _HTTPS),
    ]),
    ("stage", 0.20, "uat-test", [
        TypeSpec("drone", 0.40, "flux", _DRONE, _SSH),
        TypeSpec("large", 0.30, "flux", _LARGE, _HTTPS),
        TypeSpec("small", 0.30, "flux", _SMALL, _SCP),
    ]),
    ("prod", 0.70, "production", [
        TypeSpec("drone", 0.40, "flux", _DRONE, _SSH),
        TypeSpec("large", 0.30, "argocd", _LARGE, _ARGO),
        TypeSpec("small", 0.30, "flux", _SMALL, _HTTPS),
    ]),
]  # fmt: skip
TEAMS = {
    "commerce": ["payments", "checkout", "catalog", "search", "cart"],
    "fulfilment": ["orders", "inventory", "shipping", "billing", "pricing"],
    "identity": ["accounts", "auth", "gateway", "notifications", "support"],
    "insights": ["recommendations", "reviews", "reporting", "media", "analytics"],
}
WORKLOADS = [workload for names in TEAMS.values() for workload in names]
TEAM_OF = {workload: team for team, names in TEAMS.items() for workload in names}
# Assignments per cluster type, so that every cluster runs ~20 reconciler objects: a Flux
# cluster has a GitRepository and a Kustomization per source, an Argo CD cluster one
# Application.
ASSIGNMENTS = {"flux": 9, "argocd": 19}
# Hours after dev that a version reaches stage and prod; which versions stop on the way.
PROMOTION = {"dev": (0, ()), "stage": (26, (6,)), "prod": (76, (5, 6))}
PLATFORM_DELAY_MINUTES = {"dev": 0, "stage": 40, "prod": 80}


def sha1(seed: str) -> str:
    return hashlib.sha1(seed.encode()).hexdigest()


def app_url(workload: str) -> str:
    return f"https://github.com/contoso/{workload}-gitops"


class Tables:
    """Rows of the small tables, each table's in the order written; ids are 1, 2, 3, ..."""

    def __init__(self) -> None:
        self.rows: dict[str, list[dict[str, Any]]] = {}

    def add(self, table: str, **row: Any) -> int:
        rows = self.rows.setdefault(table, [])
        rows.append(row)
        if table not in UNNUMBERED:
            row.setdefault("id", len(rows))
        return len(rows)


UNNUMBERED = {"branch_commit", "bench.object_kind", "bench.cluster_count"}


@dataclass
class Branch:
    id: int
    repository_id: int
    chain: list[tuple[int, str]] = field(default_factory=list)  # (commit id, sha)

    def commit(self, tables: Tables, sha: str, at: datetime, message: str, **extra: Any) -> int:
        parents = [self.chain[-1][1]] if self.chain else []
        commit_id = tables.add(
            "git_commit",
            repository_id=self.repository_id,
            sha=sha,
            parent_shas=parents,
            generation=len(self.chain),
            author_name="GitOps Bot",
            author_email="bot@contoso.example",
            committed_at=at,
            message=message,
            harvested_at=at + timedelta(minutes=2),
            **extra,
        )
        tables.add(
            "branch_commit",
            branch_id=self.id,
            commit_id=commit_id,
            position=len(self.chain),
            mainline=True,
        )
        self.chain.append((commit_id, sha))
        return commit_id


def build_model(args: argparse.Namespace, start: datetime, end: datetime) -> Tables:
    """The fleet's small tables, and the events and object kinds its bulk is made from.

    bench.event: each new revision of a source reconcilers follow (a platform branch, an app
    folder on a branch), with the one before it, when it comes and the next one comes, and
    the cluster type it fails on, if any.
    """
    rng = random.Random(SEED)
    t = Tables()
    harvested = end - timedelta(minutes=1)
    platform = t.add(
        "repository",
        url=f"https://{_PLATFORM}",
        clone_url=f"https://{_PLATFORM}.git",
        role="platform",
        source="file",
        enabled=True,
        fetched_at=harvested,
    )
    repos = {
        w: t.add(
            "repository",
            url=app_url(w),
            clone_url=f"{app_url(w)}.git",
            role="app",
            source="file",
            enabled=True,
            fetched_at=harvested,
        )
        for w in WORKLOADS
    }
    workspaces = {team: t.add("workspace", name=f"{team}-team") for team in TEAMS}
    workloads = {
        w: t.add(
            "workload",
            workspace_id=workspaces[TEAM_OF[w]],
            name=w,
            labels=json.dumps({"type": "application"}),
            source_url=f"https://github.com/contoso/{w}",
        )
        for w in WORKLOADS
    }

    def event(key: str, sha: str, old: str | None, at: datetime, bad: int | None) -> None:
        t.add("bench.event", source_key=key, sha=sha, old_sha=old, at=at, bad_type_id=bad)

    type_index = 0
    for position, (env, share, target, specs) in enumerate(ENVIRONMENTS):
        env_id = t.add("environment", name=env, position=position)
        branches = {
            repository: Branch(
                t.add(
                    "git_branch",
                    repository_id=repository,
                    name=env,
                    environment_id=env_id,
                    harvested_at=harvested,
                ),
                repository,
            )
            for repository in (platform, *repos.values())
        }
        clusters, carried_by = round(args.clusters * share), {}
        for index, spec in enumerate(specs):
            type_id = t.add(
                "cluster_type",
                environment_id=env_id,
                name=spec.name,
                labels=json.dumps(spec.labels),
                reconciler="argocd" if spec.reconciler == "argocd" else "arc-flux",
                namespace_service="default",
                config_type="configmap",
            )
            count = round(clusters * spec.share)
            if index == len(specs) - 1:
                count = clusters - sum(
                    r["count"] for r in t.rows["bench.cluster_count"] if r["environment"] == env
                )
            t.add(
                "bench.cluster_count",
                cluster_type_id=type_id,
                count=count,
                environment=env,
                cluster_type=spec.name,
            )
            carried = sorted(
                {
                    WORKLOADS[(3 * type_index + i) % len(WORKLOADS)]
                    for i in range(ASSIGNMENTS[spec.reconciler])
                }
            )
            carried_by[type_id] = (spec, carried)
            type_index += 1
            add_object_kinds(t, type_id, env, target, spec, carried)
        for w in WORKLOADS:
            t.add(
                "deployment_target",
                workload_id=workloads[w],
                environment_id=env_id,
                name=f"{w}-{target}",
                labels=json.dumps({"purpose": target}),
                manifests_repository_id=repos[w],
                manifests_branch=env,
                manifests_path=target,
            )

        # The platform branch: a root commit the day before, then a few commits a day.
        times = [start - timedelta(days=1)]
        for day in range(args.days):
            for slot in range(args.platform_per_day):
                minutes = 480 + PLATFORM_DELAY_MINUTES[env] + slot * 540 // args.platform_per_day
                at = start + timedelta(days=day, minutes=minutes + rng.randrange(20))
                if at < end:
                    times.append(at)
        branch, previous = branches[platform], None
        for seq, at in enumerate(times):
            sha, promoted = sha1(f"platform/{env}/{seq}"), sha1(f"control-plane/{seq}")
            branch.commit(
                t,
                sha,
                at - timedelta(minutes=1),
                f"Promote {promoted[:8]} to {env}",
                promoted_commit_sha=promoted,
            )
            bad = rng.choice(list(carried_by)) if seq and rng.random() < args.failure_rate else None
            event(f"p:{env}", sha, previous, at, bad)
            previous = sha
        add_assignments(t, branch, env_id, env, target, carried_by, repos)

        # App branches: a version of each workload every 1.5 to 4 days on dev, later here.
        hours, stopped = PROMOTION[env]
        for index, w in enumerate(WORKLOADS):
            branch, path = branches[repos[w]], target
            period, offset = 1.5 + (index * 0.37) % 2.5, (index * 0.29) % 1
            releases = [(start - timedelta(days=1, minutes=-index), 0)]
            for n in itertools.count(1):
                at = start + timedelta(days=offset + (n - 1) * period, hours=hours)
                if at >= end:
                    break
                if n % 7 not in stopped:
                    releases.append((at, n))
            carriers = [type_id for type_id, (_, ws) in carried_by.items() if w in ws]
            previous = None
            for number, (at, n) in enumerate(releases):
                sha, version = sha1(f"app/{w}/{env}/{n}"), f"1.{n}.0"
                commit_id = branch.commit(t, sha, at - timedelta(minutes=1), f"{w} {version}")
                if number:
                    t.rows["manifest_revision"][-1]["valid_until_commit_id"] = commit_id
                t.add(
                    "manifest_revision",
                    repository_id=repos[w],
                    branch_id=branch.id,
                    path=path,
                    valid_from_commit_id=commit_id,
                    valid_until_commit_id=None,
                    workload_version=version,
                    version_source="image",
                    images=[f"ghcr.io/contoso/{w}:{version}"],
                    manifest_digest=f"sha256:{hashlib.sha256(sha.encode()).hexdigest()}",
                )
                fails = number and carriers and rng.random() < args.failure_rate
                event(f"a:{env}:{w}", sha, previous, at, rng.choice(carriers) if fails else None)
                previous = sha
        for branch in branches.values():
            t.rows["git_branch"][branch.id - 1]["head_commit_id"] = branch.chain[-1][0]
    return t


def add_object_kinds(
    t: Tables, type_id: int, env: str, target: str, spec: TypeSpec, carried: list[str]
) -> None:
    """What an agent of this cluster type reports: its root reconciler following the platform
    branch, and one following each of its assignments' app folders."""
    sources = [(spec.platform_url, f"p:{env}", "flux-system", "platform", spec.name)]
    for w in carried:
        url, name = app_url(w), f"{w}-{target}"
        sources.append(
            (
                f"{url}.git" if spec.reconciler == "flux" else f"{url}/",
                f"a:{env}:{w}",
                name,
                name,
                target,
            )
        )
    for url, key, flux_name, argo_name, path in sources:
        if spec.reconciler == "argocd":
            t.add(
                "bench.object_kind",
                cluster_type_id=type_id,
                reconciler="argocd",
                kind="Application",
                namespace="argocd",
                name=argo_name,
                source_url=url,
                source_ref=env,
                source_path=path,
                source_key=key,
                role="applier",
            )
            continue
        t.add(
            "bench.object_kind",
            cluster_type_id=type_id,
            reconciler="flux",
            kind="GitRepository",
            namespace="flux-system",
            name=flux_name,
            source_url=url,
            source_ref=env,
            source_path=None,
            source_key=key,
            role="source",
        )
        t.add(
            "bench.object_kind",
            cluster_type_id=type_id,
            reconciler="flux",
            kind="Kustomization",
            namespace="flux-system",
            name=flux_name,
            source_url=url,
            source_ref=f"GitRepository/flux-system/{flux_name}",
            source_path=f"./{path}",
            source_key=key,
            role="applier",
        )


def add_assignments(
    t: Tables,
    branch: Branch,
    env_id: int,
    env: str,
    target: str,
    carried_by: dict[int, tuple[TypeSpec, list[str]]],
    app_repos: dict[str, int],
) -> None:
    """The platform branch's assignments, each with a revision range per config change: one
    assignment's platform config changes with each commit after the root."""
    current: dict[int, int] = {}
    revisions: dict[int, tuple[TypeSpec, str]] = {}

    def revise(assignment: int, commit_id: int, change: int) -> None:
        spec, w = revisions[assignment]
        config = {
            "ENVIRONMENT": env.capitalize(),
            "REGION": spec.labels["region"],
            "CHANGE": str(change),
        }
        if assignment in current:
            t.rows["assignment_revision"][current[assignment] - 1]["valid_until_commit_id"] = (
                commit_id
            )
        current[assignment] = t.add(
            "assignment_revision",
            assignment_id=assignment,
            valid_from_commit_id=commit_id,
            valid_until_commit_id=None,
            namespace=f"{env}-{spec.name}-{w}-{target}"[:63],
            config=json.dumps(config),
            config_hash=hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest(),
            reconciler_kind="Application" if spec.reconciler == "argocd" else "Kustomization",
            # The Namespace's `workload` label, as Kalypso's namespace template sets it: what
            # names the assignment's workload in the gate, the DORA figures and the suspects.
            workload=w,
            app_repository_id=app_repos[w],
            app_branch=env,
            app_path=target,
        )

    root = branch.chain[0][0]
    for spec, carried in carried_by.values():
        for w in carried:
            assignment = t.add(
                "assignment",
                repository_id=branch.repository_id,
                branch_id=branch.id,
                environment_id=env_id,
                cluster_type_name=spec.name,
                deployment_target_name=f"{w}-{target}",
            )
            revisions[assignment] = (spec, w)
            revise(assignment, root, 0)
    ids = sorted(revisions)
    for seq, (commit_id, _) in enumerate(branch.chain[1:], start=1):
        revise(ids[(seq - 1) % len(ids)], commit_id, seq)


# --- writing the store ------------------------------------------------------------------------


def copy_rows(cursor: psycopg.Cursor[Any], table: str, rows: list[dict[str, Any]]) -> None:
    columns = list(dict.fromkeys(column for row in rows for column in row))
    statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(*table.split(".")), sql.SQL(", ").join(map(sql.Identifier, columns))
    )
    with cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row([row.get(column) for column in columns])


# The schema the SQL below writes; later migrations then upgrade the store as they would a
# hub's (filling what they add from what is stored).
GENERATED_REVISION = "0010_deployed_parts"

SCHEMA = """
CREATE SCHEMA bench;
CREATE TABLE bench.event (
    id int PRIMARY KEY, source_key text, sha text, old_sha text, at timestamptz,
    next_at timestamptz, bad_type_id int);
CREATE INDEX ON bench.event (at);
CREATE TABLE bench.object_kind (
    cluster_type_id int, reconciler text, kind text, namespace text, name text,
    source_url text, source_ref text, source_path text, source_key text, role text);
CREATE TABLE bench.cluster_count (
    cluster_type_id int, count int, environment text, cluster_type text);
CREATE TABLE bench.span (start_at timestamptz, end_at timestamptz);
CREATE TABLE bench.step (step int);
INSERT INTO bench.step VALUES (0), (1), (2), (3), (4);
"""

# When each event's source moves on again, and the clusters: 0.5 % never reported, 1 % went
# silent 20 minutes to 5 days ago, the others reported within the last 4 minutes.
CLUSTERS = """
UPDATE bench.event e SET next_at = n.next_at
FROM (SELECT id, lead(at) OVER (PARTITION BY source_key ORDER BY at) AS next_at
      FROM bench.event) n
WHERE n.id = e.id;
INSERT INTO cluster (id, name, environment_id, cluster_type_id, labels, token_hash,
                     registered_at, first_seen_at, last_seen_at)
SELECT row_number() OVER (ORDER BY t.cluster_type_id, n),
       format('%s-%s-%s', t.environment, t.cluster_type, lpad(n::text, 4, '0')),
       ct.environment_id, t.cluster_type_id, ct.labels,
       encode(sha256(convert_to(t.environment || t.cluster_type || n, 'UTF8')), 'hex'),
       s.start_at - interval '2 days',
       CASE WHEN mod(n, 200) = 7 THEN NULL ELSE s.start_at - interval '1 day' END,
       CASE WHEN mod(n, 200) = 7 THEN NULL
            WHEN mod(n, 100) = 3 THEN s.end_at - make_interval(secs => 1200 + mod(n * 7919, 432000))
            ELSE s.end_at - make_interval(secs => mod(n * 31, 240))
       END
FROM bench.cluster_count t
JOIN cluster_type ct ON ct.id = t.cluster_type_id
CROSS JOIN LATERAL generate_series(1, t.count) AS n
CROSS JOIN bench.span s;
"""

OBJECTS = """
INSERT INTO object_state (cluster_id, reconciler, kind, namespace, name, source_url, source_ref,
                          source_path, changed_at, first_seen_at)
SELECT c.id, k.reconciler, k.kind, k.namespace, k.name, k.source_url, k.source_ref,
       k.source_path, c.first_seen_at, c.first_seen_at
FROM cluster c JOIN bench.object_kind k ON k.cluster_type_id = c.cluster_type_id
WHERE c.last_seen_at IS NOT NULL
ORDER BY c.id, k.kind, k.name;
CREATE TABLE bench.object AS
SELECT o.id AS object_id, o.cluster_id, c.cluster_type_id, c.last_seen_at AS reported_until,
       k.source_key, k.role, k.reconciler = 'argocd' AS argo, e.name AS branch,
       o.source_url, o.source_ref, o.source_path, o.name
FROM object_state o
JOIN cluster c ON c.id = o.cluster_id
JOIN environment e ON e.id = c.environment_id
JOIN bench.object_kind k ON k.cluster_type_id = c.cluster_type_id AND k.kind = o.kind
                        AND k.namespace = o.namespace AND k.name = o.name;
CREATE INDEX ON bench.object (source_key);
ANALYZE bench.object;
"""

# One day of events: every object following an event's source picks its revision up within
# 15 minutes (t1: Progressing; t2: Ready at it, or failed at the old one); a failure recovers
# at t3; a drift shows at t4. A Flux source object only records what it fetched (step 0).
DAY = """
CREATE TABLE bench.day AS
SELECT q.*,
       q.t2 + make_interval(secs => q.recovery) AS t3,
       q.t2 + make_interval(secs => CASE WHEN q.fails THEN q.recovery ELSE 0 END
                                    + least(10800, q.gap / 4)) AS t4
FROM (
    SELECT r.*,
           r.at + make_interval(secs => 30 + mod(r.hc, 900)) AS t1,
           r.at + make_interval(secs => 30 + mod(r.hc, 900) + 20 + mod(r.h, 100)) AS t2,
           least(2400 + mod(r.h, 1200), r.gap / 4) AS recovery,
           coalesce(r.bad_type_id = r.cluster_type_id, false)
               OR mod(r.h, 1000) < 3 AS fails,
           mod(r.h / 1000, 1000) < 4 AS drifts
    FROM (
        SELECT o.object_id, o.cluster_id, o.cluster_type_id, o.role, o.argo, o.branch,
               o.name, o.source_url, o.source_ref, o.source_path, o.reported_until,
               e.sha, e.old_sha, e.at, e.bad_type_id,
               abs(hashint8(o.object_id * 7919 + e.id)::bigint) AS h,
               abs(hashint8(o.cluster_id::bigint * 1000003 + e.id)::bigint) AS hc,
               extract(epoch FROM coalesce(e.next_at - e.at, interval '10 days')) AS gap
        FROM bench.event e JOIN bench.object o ON o.source_key = e.source_key
        WHERE e.at >= %(low)s AND e.at < %(high)s
    ) r
) q
"""

TRANSITIONS = """
INSERT INTO status_transition (
    observed_at, cluster_id, object_id, source_url, source_ref, source_path, applied_revision,
    applied_sha, applied_version, attempted_revision, attempted_sha, ready, reason, message,
    health, drifted, suspended, removed, received_at)
SELECT x.observed, x.cluster_id, x.object_id, x.source_url, x.source_ref, x.source_path,
       CASE WHEN x.applied IS NULL THEN NULL WHEN x.argo THEN x.applied
            ELSE x.branch || '@sha1:' || x.applied END,
       x.applied, NULL,
       CASE WHEN x.argo THEN x.attempted ELSE x.branch || '@sha1:' || x.attempted END,
       x.attempted, x.ready,
       CASE WHEN x.state = 'fetched' THEN 'Succeeded'
            WHEN x.argo THEN CASE x.state WHEN 'progressing' THEN 'OutOfSync'
                                          WHEN 'failed' THEN 'SyncFailed' ELSE 'Synced' END
            ELSE CASE x.state WHEN 'progressing' THEN 'Progressing'
                              WHEN 'failed' THEN 'HealthCheckFailed'
                              ELSE 'ReconciliationSucceeded' END END,
       CASE WHEN x.state = 'fetched'
                THEN format('stored artifact for revision ''%s@sha1:%s''', x.branch, x.attempted)
            WHEN x.state = 'progressing' THEN 'Reconciliation in progress'
            WHEN x.state = 'failed' AND x.argo THEN 'one or more objects failed to apply'
            WHEN x.state = 'failed' THEN format('health check failed after 5m0s: timeout '
                 'waiting for: [Deployment/%s/%s status: ''InProgress'']', x.branch, x.name)
            WHEN x.argo THEN 'successfully synced (all tasks run)'
            ELSE format('Applied revision: %s@sha1:%s', x.branch, x.applied) END,
       CASE x.state WHEN 'progressing' THEN 'Progressing' WHEN 'failed' THEN 'Degraded'
                    ELSE 'Healthy' END,
       x.state = 'drifted', false, false, x.observed + interval '300 milliseconds'
FROM (
    SELECT p.*,
           CASE s.step WHEN 0 THEN p.t1 - interval '15 seconds' WHEN 1 THEN p.t1
                       WHEN 2 THEN p.t2 WHEN 3 THEN p.t3 ELSE p.t4 END AS observed,
           CASE WHEN s.step = 0 THEN NULL WHEN s.step = 1 OR (s.step = 2 AND p.fails)
                THEN p.old_sha ELSE p.sha END AS applied,
           p.sha AS attempted,
           CASE WHEN s.step = 0 THEN true WHEN s.step = 1 THEN NULL
                WHEN s.step = 2 THEN NOT p.fails ELSE true END AS ready,
           CASE WHEN s.step = 0 THEN 'fetched' WHEN s.step = 1 THEN 'progressing'
                WHEN s.step = 2 AND p.fails THEN 'failed' WHEN s.step = 4 THEN 'drifted'
                ELSE 'ready' END AS state
    FROM bench.day p
    JOIN bench.step s ON CASE WHEN p.role = 'source' THEN s.step = 0
                              ELSE s.step IN (1, 2) OR (s.step = 3 AND p.fails)
                                   OR (s.step = 4 AND p.drifts) END
) x
WHERE x.observed <= x.reported_until
ORDER BY x.observed
"""

# The heartbeats of one day: every 5 minutes a full snapshot (and now and then a change
# report) from each cluster that reported then, with its objects.
HEARTBEAT_DAYS = 30
HEARTBEATS = """
INSERT INTO cluster_heartbeat (cluster_id, bucket_at, report_count, object_count)
SELECT c.id, b.bucket, 1 + (mod(abs(hashint8(c.id::bigint * 7919 + b.number)), 5) = 0)::int,
       n.objects
FROM cluster c
JOIN (SELECT cluster_id, count(*) AS objects FROM object_state GROUP BY 1) n
  ON n.cluster_id = c.id
CROSS JOIN LATERAL (
    SELECT t.bucket, row_number() OVER () AS number
    FROM generate_series(
        date_bin(INTERVAL '5 minutes', GREATEST(%(low)s, c.first_seen_at),
                 TIMESTAMPTZ '2000-01-01 UTC'),
        LEAST(%(high)s, c.last_seen_at), INTERVAL '5 minutes') AS t (bucket)
    WHERE t.bucket >= %(low)s AND t.bucket < %(high)s
) b
"""

# The drift periods of one day of events, as the drift job records them: an object that
# applies what its source moved to is behind from the evaluation after the commit (30 s) until
# it applies it, and failing too until it recovers; its cluster is drifted while any of its
# objects is (the day's periods of a cluster that overlap, merged). The periods of what still
# goes on at the end are the drift job's, when the benchmark runs it.
PERIODS = """
CREATE TEMPORARY TABLE day_period AS
SELECT d.cluster_id, d.object_id, d.at + interval '30 seconds' AS started_at,
       CASE WHEN d.fails THEN d.t3 ELSE d.t2 END AS ended_at,
       CASE WHEN d.fails THEN '{behind,failing}' ELSE '{behind}' END::varchar(32)[] AS reasons
FROM bench.day d
WHERE d.role <> 'source' AND CASE WHEN d.fails THEN d.t3 ELSE d.t2 END <= d.reported_until;
INSERT INTO drift_period (cluster_id, object_id, started_at, ended_at, reasons)
SELECT cluster_id, object_id, started_at, ended_at, reasons FROM day_period
UNION ALL
SELECT cluster_id, NULL, min(started_at), max(ended_at), '{}'
FROM (
    SELECT p.*, sum(p.island) OVER (PARTITION BY p.cluster_id ORDER BY p.started_at) AS number
    FROM (
        SELECT d.*, CASE WHEN d.started_at <= max(d.ended_at) OVER (
                             PARTITION BY d.cluster_id ORDER BY d.started_at
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                         THEN 0 ELSE 1 END AS island
        FROM day_period d
    ) p
) i
GROUP BY cluster_id, number;
DROP TABLE day_period, bench.day;
"""

FINISH = """
CREATE TABLE bench.last AS
SELECT o.id, t.*, f.first_at
FROM object_state o
CROSS JOIN LATERAL (
    SELECT s.observed_at, s.source_url, s.source_ref, s.source_path, s.applied_revision,
           s.applied_sha, s.applied_version, s.attempted_revision, s.attempted_sha, s.ready,
           s.reason, s.message, s.health, s.drifted, s.suspended
    FROM status_transition s WHERE s.object_id = o.id ORDER BY s.observed_at DESC LIMIT 1
) t
CROSS JOIN LATERAL (
    SELECT s.observed_at AS first_at FROM status_transition s
    WHERE s.object_id = o.id ORDER BY s.observed_at LIMIT 1
) f;
UPDATE object_state o SET
    source_url = l.source_url, source_ref = l.source_ref, source_path = l.source_path,
    applied_revision = l.applied_revision, applied_sha = l.applied_sha,
    applied_version = l.applied_version, attempted_revision = l.attempted_revision,
    attempted_sha = l.attempted_sha, ready = l.ready, reason = l.reason, message = l.message,
    health = l.health, drifted = l.drifted, suspended = l.suspended,
    last_transition_at = l.observed_at, changed_at = l.observed_at, first_seen_at = l.first_at
FROM bench.last l WHERE l.id = o.id;
INSERT INTO agent_session (cluster_id, boot_id, agent_version, instance, max_sequence,
                           seen_window, started_at, last_report_at, report_count)
SELECT c.id, md5(c.name), '0.1.0', c.name || '-agent-0',
       extract(epoch FROM c.last_seen_at - c.first_seen_at)::bigint / 300, 1,
       c.first_seen_at, c.last_seen_at,
       extract(epoch FROM c.last_seen_at - c.first_seen_at)::bigint / 300
FROM cluster c WHERE c.last_seen_at IS NOT NULL;
DROP SCHEMA bench CASCADE;
"""


def serial_tables(connection: psycopg.Connection[Any]) -> list[str]:
    rows = connection.execute(
        "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' "
        "AND column_name = 'id' AND column_default LIKE 'nextval%'"
    ).fetchall()
    return [name for (name,) in rows]


def generate(
    connection: psycopg.Connection[Any], tables: Tables, start: datetime, end: datetime
) -> None:
    """Write the fleet into the migrated, empty database."""
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '512MB'")
        cursor.execute(SCHEMA)
        cursor.execute("INSERT INTO bench.span VALUES (%s, %s)", (start, end))
        # Rows made consistent by construction: no foreign-key checks while loading, and the
        # history tables' indexes (but their keys) built once at the end, as the migrations
        # define them.
        cursor.execute("SET session_replication_role = replica")
        for table, rows in tables.rows.items():
            copy_rows(cursor, table, rows)
        cursor.execute(CLUSTERS)
        cursor.execute(OBJECTS)
        indexes = cursor.execute(
            "SELECT i.indexname, i.indexdef FROM pg_indexes i "
            "WHERE i.tablename IN ('status_transition', 'drift_period') AND NOT EXISTS ("
            "SELECT FROM pg_constraint c WHERE c.conname = i.indexname)"
        ).fetchall()
        for name, _ in indexes:
            cursor.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
        low, total, started = start - timedelta(days=2), 0, time.perf_counter()
        while low < end:
            cursor.execute(DAY, {"low": low, "high": low + timedelta(days=1)})
            cursor.execute(TRANSITIONS)
            total += cursor.rowcount
            cursor.execute(PERIODS)
            if low >= end - timedelta(days=HEARTBEAT_DAYS):
                cursor.execute(HEARTBEATS, {"low": low, "high": low + timedelta(days=1)})
            low += timedelta(days=1)
            if (low - start).days % 15 == 0:
                print(
                    f"  {total:,} transitions up to {low:%Y-%m-%d} "
                    f"({time.perf_counter() - started:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
        cursor.execute("SET session_replication_role = DEFAULT")
        for _, definition in indexes:
            cursor.execute(definition)
        cursor.execute(FINISH)
        for table in serial_tables(connection):
            cursor.execute(
                sql.SQL(
                    "SELECT setval(pg_get_serial_sequence({}, 'id'), "
                    "coalesce((SELECT max(id) FROM {}), 0) + 1, false)"
                ).format(sql.Literal(table), sql.Identifier(table))
            )


# --- the scratch database ---------------------------------------------------------------------


def admin_url(url: str) -> str:
    return with_database(url, "postgres")


def migration_digests() -> dict[str, str]:
    """Each migration file's digest, by file name."""
    versions = files("migrations") / "versions"
    return {
        item.name: hashlib.sha256(item.read_bytes()).hexdigest()[:16]
        for item in sorted(versions.iterdir(), key=lambda i: i.name)
        if item.name.endswith(".py") and item.name != "__init__.py"
    }


def generator() -> str:
    """A digest of what the store is generated from (the migrations up to GENERATED_REVISION
    included), so a kept store generated differently is not reused."""
    parts = [SCHEMA, CLUSTERS, OBJECTS, DAY, TRANSITIONS, PERIODS, HEARTBEATS, FINISH]
    parts += [repr(ENVIRONMENTS), repr(TEAMS), repr(HEARTBEAT_DAYS)]
    parts.append(GENERATED_REVISION)
    parts += [inspect.getsource(f) for f in (build_model, add_object_kinds, add_assignments)]
    digests = migration_digests()
    generated_with = [name for name in digests if GENERATED_REVISION.split("_")[0] >= _number(name)]
    parts += [digests[name] for name in generated_with]
    return hashlib.sha256("".join(parts).encode()).hexdigest()[:16]


def _number(migration: str) -> str:
    """A migration file's number: `2026_11_22_0004-query_views.py` -> `0004`."""
    return migration.split("-")[0].rsplit("_", 1)[1]


def store_marker(args: argparse.Namespace) -> dict[str, Any]:
    return {
        MARKER: {
            "generator": generator(),
            "clusters": args.clusters,
            "days": args.days,
            "platform_per_day": args.platform_per_day,
            "failure_rate": args.failure_rate,
        }
    }


def upgradable(found: dict[str, Any]) -> bool:
    """The migrations the kept store was upgraded with are all here, unchanged: the newer ones
    upgrade it as they would a hub's store. A migration changed since means a store that no
    upgrade makes: it is generated again."""
    now = migration_digests()
    applied = found.get("migrations", {})
    return all(now.get(name) == digest for name, digest in applied.items())


def kept_store(url: str, args: argparse.Namespace) -> tuple[datetime, float] | None:
    """When the database holds a complete store generated as asked: when it was generated and
    how long that took."""
    name = database_name(url)
    with psycopg.connect(admin_url(url), autocommit=True) as admin:
        row = admin.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            (name,),
        ).fetchone()
    if row is None or not row[0]:
        return None
    try:
        comment = json.loads(row[0])
    except ValueError:
        return None
    wanted = store_marker(args)[MARKER]
    found = comment.get(MARKER, {})
    if {key: found.get(key) for key in wanted} != wanted or not upgradable(found):
        return None
    return datetime.fromisoformat(found["generated_at"]), found["seconds"]


def recreate(url: str) -> None:
    name = database_name(url)
    if name in PROTECTED_DATABASES:
        raise SystemExit(f"refusing to use the {name!r} database; name a scratch database")
    with psycopg.connect(admin_url(url), autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop(url: str) -> None:
    with psycopg.connect(admin_url(url), autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(database_name(url))
            )
        )


def mark(url: str, args: argparse.Namespace, generated_at: datetime, seconds: float) -> None:
    marker = store_marker(args)
    marker[MARKER] |= {
        "generated_at": generated_at.isoformat(),
        "seconds": round(seconds),
        "migrations": migration_digests(),
    }
    with psycopg.connect(admin_url(url), autocommit=True) as admin:
        admin.execute(
            sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                sql.Identifier(database_name(url)), sql.Literal(json.dumps(marker))
            )
        )


def catch_up(connection: psycopg.Connection[Any]) -> None:
    """Move the agents' last reports forward to now, as if they had kept reporting: the
    generated agents reported last within four minutes before the store's end, and ten minutes
    later (FLEETMARK_STALE_AFTER_SECONDS) every one of them would be stale, not the 1 % that
    went silent. Run before each endpoint is measured, so every endpoint meets the same fleet
    (a kept store's too), however long the jobs and the other endpoints took.

    Ingest spreads these updates over the five minutes between snapshots, and autovacuum keeps
    up with tables this small; done at once, they leave a dead version of every row that the
    endpoint measured next would walk past. So they are vacuumed away, as autovacuum would
    within a minute."""
    connection.execute(
        "WITH shift AS (SELECT now() - max(last_seen_at) AS by FROM cluster) "
        "UPDATE cluster SET last_seen_at = last_seen_at + shift.by FROM shift "
        "WHERE last_seen_at IS NOT NULL"
    )
    connection.execute(
        "WITH shift AS (SELECT now() - max(last_report_at) AS by FROM agent_session) "
        "UPDATE agent_session SET last_report_at = last_report_at + shift.by FROM shift"
    )
    connection.commit()
    autocommit = connection.autocommit
    connection.autocommit = True
    try:
        connection.execute("VACUUM cluster, agent_session")
    finally:
        connection.autocommit = autocommit


# --- what to ask --------------------------------------------------------------------------------


@dataclass
class Facts:
    """Names and revisions picked from the store for the questions."""

    cluster: str
    object_name: str
    commits: dict[str, str]  # environment -> the platform commit before the head
    workloads: dict[str, tuple[str, str]]  # environment -> (workload, its current version)
    clusters_in: dict[str, int]
    workload_clusters: dict[str, int]  # environment -> clusters expected for its workload
    latest: datetime


def pick_facts(connection: psycopg.Connection[Any]) -> Facts:
    cluster = connection.execute(
        "SELECT c.name FROM cluster c JOIN environment e ON e.id = c.environment_id "
        "WHERE e.name = 'prod' AND c.last_seen_at IS NOT NULL ORDER BY c.name LIMIT 1"
    ).fetchone()[0]
    object_name = connection.execute(
        "SELECT o.name FROM object_state o JOIN cluster c ON c.id = o.cluster_id "
        "WHERE c.name = %s AND o.kind IN ('Kustomization', 'Application') "
        "AND o.name <> 'flux-system' AND o.name <> 'platform' ORDER BY o.name LIMIT 1",
        (cluster,),
    ).fetchone()[0]
    commits, workloads, clusters_in, workload_clusters = {}, {}, {}, {}
    for (env,) in connection.execute("SELECT name FROM environment ORDER BY position").fetchall():
        commits[env] = connection.execute(
            "SELECT c.sha FROM git_branch b JOIN repository r ON r.id = b.repository_id "
            "JOIN environment e ON e.id = b.environment_id "
            "JOIN branch_commit bc ON bc.branch_id = b.id AND bc.mainline "
            "JOIN git_commit c ON c.id = bc.commit_id "
            "WHERE r.role = 'platform' AND e.name = %s ORDER BY bc.position DESC OFFSET 1 LIMIT 1",
            (env,),
        ).fetchone()[0]
        # The workload on most cluster types of the environment, at its current version.
        workloads[env] = connection.execute(
            "SELECT w.name, m.workload_version "
            "FROM assignment a JOIN environment e ON e.id = a.environment_id "
            "JOIN deployment_target d ON d.name = a.deployment_target_name "
            "AND d.environment_id = e.id JOIN workload w ON w.id = d.workload_id "
            "JOIN git_branch b ON b.repository_id = d.manifests_repository_id "
            "AND b.name = d.manifests_branch "
            "JOIN manifest_revision m ON m.branch_id = b.id AND m.path = d.manifests_path "
            "AND m.valid_until_commit_id IS NULL "
            "WHERE e.name = %s GROUP BY w.name, m.workload_version "
            "ORDER BY count(*) DESC, w.name LIMIT 1",
            (env,),
        ).fetchone()
        clusters_in[env] = connection.execute(
            "SELECT count(*) FROM cluster c JOIN environment e ON e.id = c.environment_id "
            "WHERE e.name = %s",
            (env,),
        ).fetchone()[0]
        workload_clusters[env] = connection.execute(
            "SELECT count(*) FROM cluster c JOIN cluster_type ct ON ct.id = c.cluster_type_id "
            "WHERE c.environment_id = (SELECT id FROM environment WHERE name = %s) "
            "AND ct.name IN (SELECT a.cluster_type_name FROM assignment a "
            "JOIN deployment_target d ON d.name = a.deployment_target_name "
            "AND d.environment_id = a.environment_id JOIN workload w ON w.id = d.workload_id "
            "WHERE w.name = %s AND a.environment_id = c.environment_id)",
            (env, workloads[env][0]),
        ).fetchone()[0]
    latest = connection.execute("SELECT max(observed_at) FROM status_transition").fetchone()[0]
    connection.commit()
    return Facts(cluster, object_name, commits, workloads, clusters_in, workload_clusters, latest)


Params = dict[str, str | list[str]]


@dataclass(frozen=True)
class Endpoint:
    label: str
    route: str | None  # as the hub's OpenAPI document names it; None: a page, not in it
    path: str
    params: Params
    target_ms: float | None


def ask(
    label: str,
    route: str,
    target_ms: float | None = None,
    path: str | None = None,
    **params: str | list[str],
) -> Endpoint:
    return Endpoint(label, route, path or route, params, target_ms)


def page(label: str, path: str, **params: str) -> Endpoint:
    return Endpoint(f"page: {label}", None, path, params, PAGE_TARGET_MS)


CLUSTER, FLEET, HISTORY = "/api/v1/clusters/{name}", "/api/v1/fleet", "/api/v1/history"
GATE, DRIFT, DIFF, DORA = "/api/v1/gates/promotion", "/api/v1/drift", "/api/v1/diff", "/api/v1/dora"
TIMELINE = "/api/v1/timeline"


def endpoints(f: Facts) -> list[Endpoint]:
    """What is measured, the baseline first. One line per question."""
    week, day = (f.latest - timedelta(days=n) for n in (7, 1))
    hour = {"since": (f.latest - timedelta(hours=1)).isoformat(), "until": f.latest.isoformat()}
    gates = [
        *(
            ("platform commit", env, f.clusters_in[env], {"commit": sha})
            for env, sha in f.commits.items()
        ),
        *(
            ("workload version", env, f.workload_clusters[env], {"workload": w, "version": v})
            for env, (w, v) in f.workloads.items()
        ),
    ]
    return [
        ask("baseline: one cluster (its detail)", CLUSTER, TARGET_MS,
            path=f"/api/v1/clusters/{f.cluster}"),
        *(ask(f"gate, {what}, {env} ({n:,} clusters)", GATE, TARGET_MS, environment=env, **q)
          for what, env, n, q in gates),
        ask("gate, platform commit, prod, page 21 by last report", GATE, TARGET_MS,
            environment="prod", commit=f.commits["prod"], offset="2000", sort="-last_report"),
        ask("fleet, first page", FLEET, TARGET_MS),
        ask("fleet, prod, page 21", FLEET, TARGET_MS, environment="prod", offset="2000"),
        ask("fleet, prod, page 21 by failing", FLEET, TARGET_MS, environment="prod",
            offset="2000", sort="-failing"),
        ask("history, first page", HISTORY, TARGET_MS),
        ask("history, one cluster", HISTORY, TARGET_MS, cluster=f.cluster),
        ask("history, one cluster, 7 days", HISTORY, TARGET_MS, cluster=f.cluster,
            since=week.isoformat()),
        ask("history, stage large, 1 day", HISTORY, TARGET_MS, environment="stage",
            cluster_type="large", since=day.isoformat()),
        ask("history, one object name, 20", HISTORY, TARGET_MS, object=f.object_name, limit="20"),
        ask("drift, first page", DRIFT, TARGET_MS),
        ask("drift, prod", DRIFT, TARGET_MS, environment="prod"),
        ask("drift, by drifted since", DRIFT, TARGET_MS, sort="-drifted_since"),
        ask("drift, every object, page 101 by cluster", DRIFT, TARGET_MS,
            include_in_sync="true", offset="10000", sort="cluster"),
        ask("drift history, one cluster", f"{DRIFT}/history", TARGET_MS, cluster=f.cluster),
        ask("env diff, dev stage", DIFF, TARGET_MS, environment=["dev", "stage"]),
        ask("env diff, dev stage prod", DIFF, TARGET_MS, environment=["dev", "stage", "prod"]),
        ask("env diff, dev stage prod, by cluster type", DIFF, TARGET_MS,
            environment=["dev", "stage", "prod"], sort="-cluster_type"),
        ask("dora, all environments", DORA, TARGET_MS),
        ask("dora, prod, 30 days to 30 days ago", DORA, TARGET_MS, environment="prod",
            since=(f.latest - timedelta(days=60)).isoformat(),
            until=(f.latest - timedelta(days=30)).isoformat()),
        ask(f"dora, workload {f.workloads['prod'][0]}", DORA, TARGET_MS,
            workload=f.workloads["prod"][0]),
        ask("dora deployments, first page", f"{DORA}/deployments", TARGET_MS),
        *(ask(f"suspects, {env}, 2 hours", "/api/v1/suspects", SUSPECTS_TARGET_MS,
              environment=env,
              since=(f.latest - timedelta(hours=2)).isoformat(), until=f.latest.isoformat())
          for env in ("dev", "prod")),
        ask("dora deployments, CSV", f"{DORA}/deployments.csv", TARGET_MS),
        ask("timeline, last hour, first page", TIMELINE, TIMELINE_TARGET_MS, **hour),
        ask("timeline, last hour, prod", TIMELINE, TIMELINE_TARGET_MS, environment="prod", **hour),
        ask("timeline, last hour, one cluster", TIMELINE, TIMELINE_TARGET_MS, cluster=f.cluster,
            **hour),
        page("fleet overview", "/"),
        page("fleet overview, prod, page 41", "/", environment="prod", offset="2000"),
        page("drift", "/drift"),
        page("drift, by reasons", "/drift", sort="reasons"),
        page("environment diff", "/diff"),
        page("one cluster", f"/clusters/{f.cluster}"),
        page("gate, platform commit, prod", "/gate", environment="prod",
             commit=f.commits["prod"]),
        page("repositories", "/repositories"),
        page("timeline, last hour", "/timeline", **hour),
    ]  # fmt: skip


@dataclass
class Measured:
    endpoint: Endpoint
    latencies: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    error: str | None = None

    def p(self, fraction: float) -> float:
        return percentile(sorted(self.latencies), fraction)


def measure(client: httpx.Client, endpoint: Endpoint, args: argparse.Namespace) -> Measured:
    """Warm-up requests, then requests one after the other until --requests or the time
    budget is reached; one measured request at least, however slow."""
    found = Measured(endpoint)
    started = time.perf_counter()
    for index in range(args.warmup + args.requests):
        elapsed = time.perf_counter() - started
        measured = index >= args.warmup
        if found.latencies and elapsed > args.budget:
            break
        if not measured and elapsed > args.budget / 3:
            continue  # a slow endpoint: its time goes to measured requests
        sent = time.perf_counter()
        try:
            response = client.get(endpoint.path, params=endpoint.params)
        except httpx.TimeoutException:
            found.error = f"no answer within {args.timeout:g} s"
            return found
        if response.status_code != 200:
            found.error = f"HTTP {response.status_code}: {response.text[:300]}"
            return found
        if measured:
            found.latencies.append(time.perf_counter() - sent)
            found.sizes.append(len(response.content))
    return found


@dataclass
class Jobs:
    """Seconds one run of each job took."""

    # The drift job judging every object (as every FULL_PASS_EVERY), then what a minute of
    # reports changed (as every other round), and how many objects that was.
    drift_full: float
    drift_incremental: float
    drift_judged: int
    # The env diff's summary refreshed reading every cluster (as every envdiff FULL_PASS_EVERY),
    # then reading those the minute of reports changed, and how many clusters that was; the
    # diff of every environment kept after it.
    env_diff_full: float
    env_diff_incremental: float
    env_diff_clusters: int
    keep_diff: float
    # The DORA rollup built from an empty one, then brought up to date once more.
    dora_full: float
    dora_incremental: float
    # The readiness turns of the whole history kept (the hub's first round), then one more round.
    readiness_full: float
    readiness_incremental: float


def run_jobs(url: str) -> Jobs:
    """One run of the hub's drift job and one of its deployed-summary refresh, as a hub runs
    them every --drift-interval and --env-diff-interval, and two of its DORA refresh: from an
    empty rollup (as a hub's first), then again (as every later one, each --dora-interval), and
    one of its rollouts job on that rollup; two rounds of its readiness job: the whole history's
    turns kept (as a hub's first), then one more (as every later one, each minute).
    Their tables are what GET /api/v1/drift, /api/v1/diff and /api/v1/dora read. The agents'
    last reports are caught up first, as for every measurement: the job would otherwise find every
    cluster stale and open a drift period for each of the fleet's objects."""

    async def refresh_dora(sessions: Any) -> float:
        started = time.perf_counter()
        async with write_session(sessions) as session:
            await refresh_rollup(
                session,
                now=datetime.now(UTC),
                settle=HubSettings.model_fields["dora_settle_after"].default,
            )
        return time.perf_counter() - started

    async def keep_turns(sessions: Any) -> float:
        started = time.perf_counter()
        await keep_readiness(sessions, datetime.now(UTC))
        return time.perf_counter() - started

    async def run() -> Jobs:
        engine = create_async_engine(normalise_database_url(url))
        sessions = create_sessionmaker(engine)
        try:
            with psycopg.connect(url) as connection:
                catch_up(connection)
            async with write_session(sessions) as session:
                # A kept store holds an earlier run's: this one judges every object.
                await session.execute(text("UPDATE drift_evaluation SET full_at = NULL"))
            full = await scheduled_drift(sessions, HubSettings(), clock=lambda: datetime.now(UTC))
            async with write_session(sessions) as session:
                # A kept store holds an earlier run's: this one reads every cluster.
                await session.execute(text("UPDATE deployed_refresh SET full_at = NULL"))
            started = time.perf_counter()
            summed = await refresh_deployed(sessions, now=datetime.now(UTC))
            env_diff_full = time.perf_counter() - started
            # A minute of reports: the objects the generated history changed in its last
            # minute, written now, and the agents' reports caught up.
            with psycopg.connect(url) as connection:
                connection.execute(
                    "UPDATE object_state SET written_at = now() "
                    "WHERE changed_at > (SELECT max(changed_at) FROM object_state) "
                    "- INTERVAL '1 minute'"
                )
                connection.commit()
                catch_up(connection)
            evaluation = await scheduled_drift(
                sessions, HubSettings(), clock=lambda: datetime.now(UTC)
            )
            started = time.perf_counter()
            refreshed = await refresh_deployed(sessions, now=datetime.now(UTC))
            env_diff_incremental = time.perf_counter() - started
            started = time.perf_counter()
            async with write_session(sessions) as session:
                await keep_diff(session, now=datetime.now(UTC))
            kept = time.perf_counter() - started
            async with write_session(sessions) as session:
                # A kept store holds the rollup of an earlier run.
                await session.execute(text("DELETE FROM dora_rollup"))
                await session.execute(text("DELETE FROM dora_refresh"))
            dora_full = await refresh_dora(sessions)
            dora_incremental = await refresh_dora(sessions)
            # The rollouts the timeline reads, judged from the rollup as the hub's job does.
            await scheduled_rollouts(sessions, HubSettings())
            # The readiness turns the timeline's health rows read. A kept store holds those of
            # an earlier run.
            async with write_session(sessions) as session:
                await session.execute(text("DELETE FROM readiness_turn"))
                await session.execute(
                    text(
                        "UPDATE rollup_watermark SET materialized_until = NULL "
                        "WHERE name = 'readiness_turn'"
                    )
                )
            readiness_full = await keep_turns(sessions)
            readiness_incremental = await keep_turns(sessions)
        finally:
            await engine.dispose()
        assert full.full, "the first drift round judges every object"
        assert not evaluation.full, "the second judges what changed since"
        assert summed.full, "the first env diff refresh reads every cluster"
        assert not refreshed.full, "the second reads the clusters that changed since"
        return Jobs(
            full.seconds,
            evaluation.seconds,
            evaluation.judged,
            env_diff_full,
            env_diff_incremental,
            refreshed.clusters,
            kept,
            dora_full,
            dora_incremental,
            readiness_full,
            readiness_incremental,
        )

    return asyncio.run(run())


# --- the run ----------------------------------------------------------------------------------


def add_store_options(parser: argparse.ArgumentParser, database_url: str) -> None:
    """The options that say which store to generate, where, and whether to keep it."""
    store = parser.add_argument_group("store")
    store.add_argument("--clusters", type=int, default=10_000)
    store.add_argument("--days", type=int, default=90, help="Days of history.")
    store.add_argument(
        "--platform-per-day", type=int, default=3, help="Platform commits a day per environment."
    )
    store.add_argument(
        "--failure-rate",
        type=float,
        default=0.04,
        help="Share of revisions that fail on one cluster type (and recover).",
    )
    store.add_argument(
        "--database-url",
        default=database_url,
        help="A scratch database: created for the run and dropped afterwards (its server's "
        "`postgres` database is used to do so).",
    )
    store.add_argument(
        "--keep",
        action="store_true",
        help="Keep the store afterwards, and reuse a kept one generated with the same options "
        "(upgraded by the migrations added since, as a hub's store would be).",
    )
    store.add_argument(
        "--timescaledb",
        action="store_true",
        help="Then the same on TimescaleDB (the embedded PostgreSQL with TimescaleDB preloaded; "
        "`bash .ci/timescaledb` installs it), its old chunks compressed, side by side.",
    )
    store.add_argument(
        "--timescaledb-only",
        action="store_true",
        help="The TimescaleDB store alone, without the plain PostgreSQL one before it.",
    )
    store.add_argument(
        "--timescaledb-data-dir",
        type=Path,
        default=None,
        help="Where that server keeps its files (default: a temporary directory); name one "
        "with --keep to keep its store too.",
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="benchmarks/query.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_store_options(parser, DEFAULT_DATABASE_URL)
    run = parser.add_argument_group("measurement")
    run.add_argument("--requests", type=int, default=200, help="Measured requests per endpoint.")
    run.add_argument("--warmup", type=int, default=3, help="Unmeasured requests per endpoint.")
    run.add_argument(
        "--budget",
        type=float,
        default=30.0,
        help="Seconds per endpoint at most (one measured request at least).",
    )
    run.add_argument("--timeout", type=float, default=300.0, help="Seconds one request may take.")
    run.add_argument(
        "--only", action="append", default=[], help="Only endpoints whose label has this text."
    )
    hub = parser.add_argument_group("hub")
    hub.add_argument("--workers", type=int, default=1, help="`fleetmark serve --workers`.")
    hub.add_argument("--port", type=int, default=0, help="Hub port (0: a free port).")
    hub.add_argument("--fleetmark", default=None, help="The fleetmark executable.")
    hub.add_argument(
        "--hub-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Extra environment for the hub process, repeatable.",
    )
    return parser.parse_args()


def load() -> str:
    one, five, fifteen = psutil.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


@dataclass
class Store:
    generated: str
    clusters: dict[str, int]
    objects: int
    transitions: int
    commits: int
    size: int
    tables: list[tuple[str, int]]


def describe(connection: psycopg.Connection[Any], generated: str) -> Store:
    def one(query: str) -> Any:
        return connection.execute(query).fetchone()[0]

    clusters = dict(
        connection.execute(
            "SELECT e.name, count(*) FROM cluster c JOIN environment e "
            "ON e.id = c.environment_id GROUP BY e.name, e.position ORDER BY e.position"
        ).fetchall()
    )
    tables = connection.execute(
        "SELECT relname, pg_total_relation_size(oid) FROM pg_class "
        "WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace "
        "ORDER BY 2 DESC LIMIT 4"
    ).fetchall()
    store = Store(
        generated=generated,
        clusters=clusters,
        objects=one("SELECT count(*) FROM object_state"),
        transitions=one("SELECT count(*) FROM status_transition"),
        commits=one("SELECT count(*) FROM git_commit"),
        size=one("SELECT pg_database_size(current_database())"),
        tables=tables,
    )
    connection.commit()
    return store


@contextlib.contextmanager
def served(args: argparse.Namespace, url: str, workdir: Path) -> Iterator[Hub]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETMARK_")}
    env |= {
        "FLEETMARK_DATA_DIR": str(workdir / "data"),
        "FLEETMARK_DATABASE_URL": url,
        # The generated repositories cannot be fetched: no harvest. The drift, env diff and
        # DORA jobs ran before the hub started; they, and the gate's kept answers (judging
        # every environment's newest commits, half a second a minute at 10,000 clusters), do
        # not run while requests are measured.
        "FLEETMARK_HARVEST_INTERVAL": "86400",
        "FLEETMARK_DRIFT_INTERVAL": "86400",
        "FLEETMARK_ENV_DIFF_INTERVAL": "86400",
        "FLEETMARK_DORA_INTERVAL": "86400",
        "FLEETMARK_GATE_ANSWERS_INTERVAL": "86400",
    }
    for pair in args.hub_env:
        key, separator, value = pair.partition("=")
        if not separator:
            raise SystemExit(f"--hub-env {pair!r}: expected KEY=VALUE")
        env[key] = value
    hub = Hub(fleetmark_executable(args.fleetmark), env, workdir / "data", args.port or free_port())
    try:
        hub.start(args.workers)
        hub.wait_ready()
        yield hub
    except BaseException:
        print(f"the hub's output is kept in {hub.log_path}", file=sys.stderr)
        raise
    finally:
        hub.stop()


@dataclass
class Cpu:
    """What the machine's cores did while requests were measured, in cores on average."""

    machine: float
    hub: float
    backends: float
    client: float

    def __str__(self) -> str:
        others = self.machine - self.hub - self.backends - self.client
        return (
            f"{self.machine:.2f} of {os.cpu_count()} cores: the hub {self.hub:.2f}, its "
            f"PostgreSQL backends {self.backends:.2f}, this client {self.client:.2f}, "
            f"everything else {others:.2f}"
        )


@dataclass
class Run:
    results: list[Measured]
    skipped: list[Endpoint]
    cpu: Cpu
    load_before: str
    load_after: str
    rss: int
    uss: int | None
    peak: int


def run_requests(args: argparse.Namespace, url: str, facts: Facts, workdir: Path) -> Run:
    with served(args, url, workdir) as hub, psycopg.connect(url) as database:
        # Named per run: a kept store may hold the token of a run that did not get to revoke it.
        name = f"bench-read-{datetime.now(UTC):%Y%m%d%H%M%S}"
        with phase("creating a read token with `fleetmark tokens create`"):
            output = hub.cli("tokens", "create", name, "--scope", "read")
            token = next(word for word in output.split() if word.startswith("fma_"))
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{hub.port}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=args.timeout,
        )
        with client:
            routes = set(client.get("/openapi.json").json()["paths"])
            wanted = [
                e for e in endpoints(facts) if not args.only or any(o in e.label for o in args.only)
            ]
            load_before = load()
            wall, machine = time.perf_counter(), busy_seconds()
            hub_cpu, backends = cumulative_cpu(hub.processes()), backend_cpu(database)
            own = time.process_time()
            results, skipped, peak = [], [], 0
            for endpoint in wanted:
                if endpoint.route is not None and endpoint.route not in routes:
                    skipped.append(endpoint)
                    continue
                catch_up(database)
                with phase(f"measuring {endpoint.label}"):
                    results.append(measure(client, endpoint, args))
                peak = max(peak, rss_bytes(hub.processes()))
            elapsed = time.perf_counter() - wall
            spent = backend_cpu(database)
            cpu = Cpu(
                machine=(busy_seconds() - machine) / elapsed,
                hub=(cumulative_cpu(hub.processes()) - hub_cpu) / elapsed,
                backends=sum(t - backends.get(pid, 0.0) for pid, t in spent.items()) / elapsed,
                client=(time.process_time() - own) / elapsed,
            )
            load_after = load()
        hub.cli("tokens", "revoke", name)
        processes = hub.processes()
        return Run(
            results,
            skipped,
            cpu,
            load_before,
            load_after,
            rss_bytes(processes),
            uss_bytes(processes),
            peak,
        )


@dataclass
class Backend:
    """One store measured: on plain PostgreSQL, or on TimescaleDB with its chunks compressed."""

    label: str
    server: Any
    store: Store
    jobs: Jobs
    compression: list[Compressed]
    run: Run


@dataclass
class Compressed:
    table: str
    chunks: int
    before: int
    after: int


def compress(url: str) -> list[Compressed]:
    """Compress the chunks older than FLEETMARK_COMPRESS_AFTER, as the hub's compression policy
    has by the time a store is 90 days old: the sizes of each hypertable before and after."""
    after = HubSettings.model_fields["compress_after"].default
    found = []
    with psycopg.connect(url, autocommit=True) as connection:
        for table in ("status_transition", "cluster_heartbeat"):
            chunks = connection.execute(
                "SELECT c FROM show_chunks(%s, older_than => now() - %s) c "
                "WHERE NOT c IN (SELECT format('%%I.%%I', chunk_schema, chunk_name)::regclass "
                "FROM timescaledb_information.chunks WHERE is_compressed)",
                (table, after),
            ).fetchall()
            for (chunk,) in chunks:
                connection.execute("SELECT compress_chunk(%s)", (chunk,))
            connection.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))
            stats = connection.execute(
                "SELECT count(*), sum(before_compression_total_bytes), "
                "sum(after_compression_total_bytes) FROM chunk_compression_stats(%s) "
                "WHERE compression_status = 'Compressed'",
                (table,),
            ).fetchone()
            found.append(Compressed(table, stats[0], stats[1] or 0, stats[2] or 0))
    return found


def prepare_store(
    args: argparse.Namespace,
    label: str,
    url: str,
    timescaledb: bool,
    before_compression: Callable[[str], None] | None = None,
) -> tuple[str, list[Compressed], Jobs]:
    """Generate the store in `url` (or reuse a kept one) and run the hub's jobs on it: how it
    was generated, what compression did, what the jobs took. `before_compression` runs on the
    store first: work a hub does on its history while it is new, as its rollups are."""
    kept = kept_store(url, args) if args.keep else None
    if kept is not None:
        generated_at, seconds = kept
        print(f"… reusing the store in {database_name(url)!r} (generated {generated_at:%c})")
        with phase("upgrading it to the newest schema, as a hub's start-up does"):
            migrate.upgrade(url)
        mark(url, args, generated_at, seconds)
        generated = f"kept from {generated_at:%Y-%m-%d %H:%M} UTC"
    else:
        with phase(f"{label}: creating database {database_name(url)!r} and migrating it"):
            recreate(url)
            migrate.upgrade(url, GENERATED_REVISION)
        end = datetime.now(UTC).replace(microsecond=0)
        start = end - timedelta(days=args.days)
        started = time.perf_counter()
        with phase(f"generating {args.clusters:,} clusters and {args.days} days of history"):
            tables = build_model(args, start, end)
            with psycopg.connect(url, autocommit=True) as connection:
                generate(connection, tables, start, end)
        with phase("upgrading the store to the newest schema, as a hub's start-up does"):
            migrate.upgrade(url)
            with psycopg.connect(url, autocommit=True) as connection:
                connection.execute("VACUUM (ANALYZE)")
        seconds = time.perf_counter() - started
        mark(url, args, end, seconds)
        generated = f"in {seconds:,.0f} s"
    if before_compression is not None:
        before_compression(url)
    compression = []
    if timescaledb:
        with phase(
            "compressing the chunks older than FLEETMARK_COMPRESS_AFTER, as the policy does"
        ):
            compression = compress(url)
    with phase(
        "evaluating drift, summing up what clusters run and rolling up DORA rollouts, "
        "as the hub's jobs do"
    ):
        jobs = run_jobs(url)
    # What the jobs wrote (the drift job's verdicts, its open periods) in the statistics, as
    # autovacuum and the statistics of a store that always had some would have them.
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("ANALYZE")
    return generated, compression, jobs


def measure_backend(
    args: argparse.Namespace, label: str, url: str, timescaledb: bool, workdir: Path
) -> Backend:
    """Generate the store in `url` (or reuse a kept one), run the jobs, measure the requests."""
    generated, compression, jobs = prepare_store(args, label, url, timescaledb)
    with psycopg.connect(url) as connection:
        facts = pick_facts(connection)
        store = describe(connection, generated)
        server = server_facts(connection)
    run = run_requests(args, url, facts, workdir)
    return Backend(label, server, store, jobs, compression, run)


def stores(args: argparse.Namespace, workdir: Path) -> Iterator[tuple[str, str, bool]]:
    """The stores asked for, one after the other: (label, URL, on TimescaleDB) for plain
    PostgreSQL at --database-url (unless --timescaledb-only), then with --timescaledb the same
    database on an embedded TimescaleDB; each dropped after its turn unless --keep."""
    found = [] if args.timescaledb_only else [("PostgreSQL", args.database_url, False)]
    if args.timescaledb or args.timescaledb_only:
        data_dir = args.timescaledb_data_dir or workdir / "timescaledb"
        server = timescaledb_server(Path(data_dir))
        found.append(("TimescaleDB", with_database(server, database_name(args.database_url)), True))
    for label, url, timescaledb in found:
        try:
            yield label, url, timescaledb
        finally:
            if not args.keep:
                with phase(f"dropping database {database_name(url)!r}"):
                    drop(url)


def header(title: str, load_at_start: str) -> None:
    print()
    print(title)
    print("  command: " + " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]))
    row("machine", f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    row("load average at start (1, 5, 15 min)", load_at_start)


def main() -> None:
    args = parse_args()
    # Stopped from outside: still stop the hub and drop the store on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    load_at_start = load()
    workdir = Path(tempfile.mkdtemp(prefix="fleetmark-query-bench-"))
    backends = []
    try:
        for label, url, timescaledb in stores(args, workdir):
            backends.append(measure_backend(args, label, url, timescaledb, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    header("fleetmark query benchmark", load_at_start)
    for backend in backends:
        print_backend(args, backend)
    if len(backends) > 1:
        side_by_side(backends)


def print_backend(args: argparse.Namespace, backend: Backend) -> None:
    server, store, run, jobs = backend.server, backend.store, backend.run, backend.jobs
    print()
    print(f"{backend.label}")
    row("PostgreSQL", f"{server.version}; TimescaleDB: {server.timescaledb}")
    row("autovacuum", server.autovacuum)
    row(
        "load average (1, 5, 15 min)", f"before measuring {run.load_before}; after {run.load_after}"
    )
    row("CPU while measuring", str(run.cpu))
    row("hub", f"fleetmark serve --workers {args.workers}, one request at a time")
    every = format_duration(HubSettings.model_fields["drift_interval"].default)
    row(
        "drift job, one evaluation",
        f"{jobs.drift_full:,.1f} s judging every object (every "
        f"{format_duration(FULL_PASS_EVERY)}), {jobs.drift_incremental:,.2f} s judging what a "
        f"minute of reports changed ({jobs.drift_judged:,} objects; a hub runs it every {every})",
    )
    every = format_duration(HubSettings.model_fields["env_diff_interval"].default)
    row(
        "env diff job, one refresh",
        f"{jobs.env_diff_full:,.1f} s reading every cluster, paced (every "
        f"{format_duration(ENV_DIFF_FULL_PASS_EVERY)}), {jobs.env_diff_incremental:,.2f} s "
        f"reading what a minute of reports changed ({jobs.env_diff_clusters:,} clusters); then "
        f"{jobs.keep_diff:,.2f} s keeping the diff of every environment (a hub runs both every "
        f"{every})",
    )
    every = format_duration(HubSettings.model_fields["dora_interval"].default)
    row(
        "DORA job, one refresh",
        f"{jobs.dora_full:,.1f} s from scratch, {jobs.dora_incremental:,.1f} s then "
        f"(a hub runs it every {every})",
    )
    every = format_duration(READINESS_INTERVAL)
    row(
        "readiness job, one round",
        f"{jobs.readiness_full:,.1f} s for the whole history, {jobs.readiness_incremental:,.1f} s "
        f"then (a hub runs it every {every})",
    )
    per_env = ", ".join(f"{env} {count:,}" for env, count in store.clusters.items())
    row(
        "store",
        f"{sum(store.clusters.values()):,} clusters ({per_env}), {store.objects:,} "
        f"objects, {store.transitions:,} transitions over {args.days} days, "
        f"{store.commits:,} commits; generated {store.generated}",
    )
    row(
        "store size",
        f"{mib(store.size)}; largest: "
        + ", ".join(f"{name} {mib(size)}" for name, size in store.tables),
    )
    for found in backend.compression:
        ratio = f"{found.before / found.after:.1f}x" if found.after else "-"
        row(
            f"compressed {found.table}",
            f"{found.chunks} chunks, {mib(found.before)} -> {mib(found.after)} ({ratio})",
        )
    print()
    results = run.results
    base = results[0] if results and results[0].error is None else None
    print(
        f"  {'endpoint':<48} {'count':>6} {'p50':>10} {'p99':>10} {'p50/base':>9} "
        f"{'p99/base':>9} {'size':>9}  target"
    )
    for result in results:
        label = result.endpoint.label
        if result.error is not None:
            print(f"  {label:<48} {result.error}")
            continue
        p50, p99 = result.p(0.50), result.p(0.99)
        ratios = (
            ("-", "-")
            if base is None
            else (f"{p50 / base.p(0.50):.1f}x", f"{p99 / base.p(0.99):.1f}x")
        )
        size = sorted(result.sizes)[len(result.sizes) // 2]
        print(
            f"  {label:<48} {len(result.latencies):>6} {p50 * 1000:>7.1f} ms "
            f"{p99 * 1000:>7.1f} ms {ratios[0]:>9} {ratios[1]:>9} {size / 1024:>6.1f} KiB  "
            f"{verdict(result)}"
        )
    for endpoint in run.skipped:
        print(f"  {endpoint.label:<48} skipped: the hub has no {endpoint.route}")
    print()
    met = "met" if run.rss < TARGET_RSS else "MISSED"
    row(
        "hub RSS after the run",
        f"{mib(run.rss)} (USS {mib(run.uss)}; peak seen {mib(run.peak)}); "
        f"target < {mib(TARGET_RSS)}: {met}",
    )


def verdict(result: Measured) -> str:
    target = result.endpoint.target_ms
    if target is None or result.error is not None:
        return ""
    return f"p99 < {target:g} ms: {'met' if result.p(0.99) * 1000 < target else 'MISSED'}"


def side_by_side(backends: list[Backend]) -> None:
    """p99 of every endpoint on each backend, one column each."""
    print()
    print("p99 side by side")
    print(f"  {'endpoint':<48} " + " ".join(f"{b.label:>24}" for b in backends))
    by_label = [{r.endpoint.label: r for r in b.run.results} for b in backends]
    for result in backends[0].run.results:
        label = result.endpoint.label
        cells = []
        for found in by_label:
            other = found.get(label)
            if other is None or other.error is not None:
                cells.append("-")
                continue
            mark_ = verdict(other).rsplit(": ", 1)[-1] if verdict(other) else ""
            cells.append(f"{other.p(0.99) * 1000:.1f} ms {mark_}".strip())
        print(f"  {label:<48} " + " ".join(f"{cell:>24}" for cell in cells))


def row(label: str, value: str) -> None:
    print(f"  {label:<34} {value}")


if __name__ == "__main__":
    main()
