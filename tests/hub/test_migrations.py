"""The Alembic history builds the schema the models describe, and takes it down again."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, pool, text

from hub import migrate
from hub.models import Base

FLEETMARK_TABLES = set(Base.metadata.tables)
# Added by the migrations only when TimescaleDB is absent (or, for the rollups, cannot keep
# continuous aggregates; the placement rollups' and the sampled health everywhere); the models
# do not declare them.
# Indexes only the migrations state: BRIN ones and one in a collation of its own, which
# reflection does not report (migration 0026).
MIGRATION_INDEXES = {
    "ix_status_transition_observed_at_brin",
    "ix_cluster_heartbeat_bucket_at_brin",
    "ix_object_state_name_c",
}
ROLLUP_TABLES = {
    "rollup_watermark",
    "heartbeat_hourly_rollup",
    "transition_hourly_rollup",
    "placement_hourly_rollup",
    "placement_drift_hourly_rollup",
    "deployment_hourly_rollup",
    "drift_period_hourly_rollup",
    "fleet_health_hourly",
    "readiness_turn",
}


def table_names(url: str) -> set[str]:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            return set(inspect(connection).get_table_names())
    finally:
        engine.dispose()


def schema_differences(url: str) -> list[object]:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            differences = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    return [
        difference
        for difference in differences
        if not (
            isinstance(difference, tuple)
            and (
                (
                    difference[0] == "remove_index"
                    and (
                        difference[1].name in MIGRATION_INDEXES
                        or difference[1].table.name in ROLLUP_TABLES
                    )
                )
                or (difference[0] == "remove_table" and difference[1].name in ROLLUP_TABLES)
            )
        )
    ]


def test_upgrade_downgrade_upgrade(fresh_database: Callable[[], str]) -> None:
    url = fresh_database()
    assert migrate.current_revision(url) is None

    migrate.upgrade(url)
    assert table_names(url) >= FLEETMARK_TABLES | {"alembic_version"}
    assert migrate.current_revision(url) == migrate.head_revision()
    assert schema_differences(url) == []

    migrate.downgrade(url, "base")
    assert table_names(url) & FLEETMARK_TABLES == set()
    assert migrate.current_revision(url) is None

    migrate.upgrade(url)
    assert table_names(url) >= FLEETMARK_TABLES
    assert migrate.current_revision(url) == migrate.head_revision()


def test_upgrade_twice_is_a_no_op(fresh_database: Callable[[], str]) -> None:
    url = fresh_database()
    migrate.upgrade(url)
    migrate.upgrade(url)
    assert migrate.current_revision(url) == migrate.head_revision()
    assert table_names(url) >= FLEETMARK_TABLES


def test_objects_learn_since_when_they_run_their_revision_from_the_history(
    fresh_database: Callable[[], str],
) -> None:
    url = fresh_database()
    migrate.upgrade(url, "0010_deployed_parts")
    engine = create_engine(url, poolclass=pool.NullPool)
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    # One object's history: A ready, A failing, A ready again, B progressing, B ready, then
    # two state changes at B that keep it ready; one object that vanished.
    history = [
        (0, "A", True, False),
        (10, "A", False, False),
        (20, "A", True, False),
        (30, "A", None, False),
        (40, "B", None, False),
        (50, "B", True, False),
        (60, "B", True, False),
    ]
    try:
        with engine.begin() as connection:
            cluster = connection.execute(
                text("INSERT INTO cluster (name) VALUES ('drone-01') RETURNING id")
            ).scalar_one()
            objects = {}
            for name, revision, ready, removed_at in [
                ("root", "B", True, None),
                ("gone", "A", True, t0),
            ]:
                objects[name] = connection.execute(
                    text(
                        "INSERT INTO object_state (cluster_id, reconciler, kind, namespace, "
                        "name, applied_revision, ready, changed_at, first_seen_at, removed_at) "
                        "VALUES (:cluster, 'flux', 'Kustomization', 'flux-system', :name, "
                        ":revision, :ready, :changed, :first, :removed) RETURNING id"
                    ),
                    {
                        "cluster": cluster,
                        "name": name,
                        "revision": revision,
                        "ready": ready,
                        "changed": t0 + timedelta(minutes=60),
                        "first": t0,
                        "removed": removed_at,
                    },
                ).scalar_one()
            for minutes, revision, ready, removed in history:
                connection.execute(
                    text(
                        "INSERT INTO status_transition (observed_at, cluster_id, object_id, "
                        "applied_revision, ready, drifted, suspended, removed) "
                        "VALUES (:at, :cluster, :object, :revision, :ready, false, false, "
                        ":removed)"
                    ),
                    {
                        "at": t0 + timedelta(minutes=minutes),
                        "cluster": cluster,
                        "object": objects["root"],
                        "revision": revision,
                        "ready": ready,
                        "removed": removed,
                    },
                )

        migrate.upgrade(url)

        with engine.connect() as connection:
            since = {
                name: (applied, ready)
                for name, applied, ready in connection.execute(
                    text("SELECT name, applied_since, ready_since FROM object_state")
                )
            }
    finally:
        engine.dispose()

    # B since its first transition (progressing at 40), Ready since 50 (the later changes
    # kept it Ready); the vanished object starts anew when it comes back.
    assert since["root"] == (t0 + timedelta(minutes=40), t0 + timedelta(minutes=50))
    assert since["gone"] == (t0 + timedelta(minutes=60), None)


def test_objects_learn_the_ref_whose_revisions_they_apply_from_their_source_objects(
    fresh_database: Callable[[], str],
) -> None:
    url = fresh_database()
    migrate.upgrade(url, "0012_drift_totals")
    engine = create_engine(url, poolclass=pool.NullPool)
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    repo = "https://github.com/contoso/platform-gitops"
    try:
        with engine.begin() as connection:
            clusters = [
                connection.execute(
                    text("INSERT INTO cluster (name) VALUES (:name) RETURNING id"),
                    {"name": name},
                ).scalar_one()
                for name in ("drone-01", "drone-02")
            ]
            objects = [
                # (cluster, reconciler, kind, name, url, ref)
                (0, "flux", "GitRepository", "flux-system", repo, "dev"),
                (0, "flux", "Kustomization", "apps", repo, "GitRepository/flux-system/flux-system"),
                (0, "flux", "Kustomization", "lost", None, "GitRepository/flux-system/gone"),
                (0, "argocd", "Application", "platform", repo, "main"),
                # The same names in another cluster, on another branch.
                (1, "flux", "GitRepository", "flux-system", repo, "stage"),
                (1, "flux", "Kustomization", "apps", repo, "GitRepository/flux-system/flux-system"),
            ]
            for cluster, reconciler, kind, name, source_url, source_ref in objects:
                connection.execute(
                    text(
                        "INSERT INTO object_state (cluster_id, reconciler, kind, namespace, "
                        "name, source_url, source_ref, changed_at, first_seen_at, "
                        "applied_since) VALUES (:cluster, :reconciler, :kind, 'flux-system', "
                        ":name, :url, :ref, :at, :at, :at)"
                    ),
                    {
                        "cluster": clusters[cluster],
                        "reconciler": reconciler,
                        "kind": kind,
                        "name": name,
                        "url": source_url,
                        "ref": source_ref,
                        "at": t0,
                    },
                )

        migrate.upgrade(url)

        with engine.connect() as connection:
            refs = {
                (cluster, name): url_ref
                for cluster, name, url_ref in connection.execute(
                    text(
                        "SELECT c.name, o.name, o.url_ref FROM object_state o "
                        "JOIN cluster c ON c.id = o.cluster_id"
                    )
                )
            }
    finally:
        engine.dispose()

    assert refs == {
        ("drone-01", "flux-system"): None,
        ("drone-01", "apps"): "dev",
        ("drone-01", "lost"): "GitRepository/flux-system/gone",
        ("drone-01", "platform"): "main",
        ("drone-02", "flux-system"): None,
        ("drone-02", "apps"): "stage",
    }


def test_objects_are_vacuumed_after_a_thousand_odd_changes_not_a_fifth_of_the_table(
    fresh_database: Callable[[], str],
) -> None:
    """The gate's index-only scan of object_state needs its changed pages vacuumed soon."""
    url = fresh_database()
    migrate.upgrade(url)
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            options = connection.scalar(
                text("SELECT reloptions FROM pg_class WHERE oid = 'object_state'::regclass")
            )
    finally:
        engine.dispose()
    assert sorted(options) == [
        "autovacuum_vacuum_scale_factor=0.01",
        "autovacuum_vacuum_threshold=1000",
    ]


def test_the_deployed_summary_holds_as_it_was_refreshed_across_0059_and_back(
    fresh_database: Callable[[], str],
) -> None:
    url = fresh_database()
    migrate.upgrade(url, "0058_drift_increments")
    engine = create_engine(url, poolclass=pool.NullPool)
    refreshed_at = datetime(2026, 12, 1, 12, tzinfo=UTC)
    summary = (
        "SELECT environment_id, cluster_type, condition, version, clusters, refreshed_at "
        "FROM deployed_version ORDER BY condition"
    )
    try:
        with engine.begin() as connection:
            for part, condition, clusters, at in [
                (0, "member", 3, refreshed_at + timedelta(seconds=1)),
                (1, "member", 2, refreshed_at),
                (1, "applied", 2, refreshed_at),
            ]:
                connection.execute(
                    text(
                        "INSERT INTO deployed_part (part, environment_id, cluster_type, "
                        "condition, version, clusters, refreshed_at) "
                        "VALUES (:part, 1, 'drone', :condition, '1.0.0', :clusters, :at)"
                    ),
                    {"part": part, "condition": condition, "clusters": clusters, "at": at},
                )
            before = connection.execute(text(summary)).all()
        migrate.upgrade(url)
        with engine.connect() as connection:
            upgraded = connection.execute(text(summary)).all()
            full_at = connection.execute(text("SELECT full_at FROM deployed_refresh")).scalar_one()
        migrate.downgrade(url, "0058_drift_increments")
        with engine.connect() as connection:
            downgraded = connection.execute(text(summary)).all()
    finally:
        engine.dispose()

    assert [row.refreshed_at for row in before] == [refreshed_at, refreshed_at]
    assert upgraded == before
    # No full pass yet: the hub's first refresh reads every cluster.
    assert full_at is None
    assert downgraded == before
