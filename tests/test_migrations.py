"""The Alembic history builds the schema the models describe, and takes it down again."""

from collections.abc import Callable

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, pool

from hub import migrate
from hub.models import Base

FLEETMARK_TABLES = set(Base.metadata.tables)
# Added by the migration only when TimescaleDB is absent; the models do not declare them.
BRIN_INDEXES = {"ix_status_transition_observed_at_brin", "ix_cluster_heartbeat_bucket_at_brin"}


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
            and difference[0] == "remove_index"
            and difference[1].name in BRIN_INDEXES
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
