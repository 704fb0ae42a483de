"""Grafana's read-only role: `fleetmark db grant-readonly ROLE` lets it read the dashboards'
views, those of later migrations too, and nothing else, its sessions without JIT."""

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, pool, text
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.ext.asyncio import AsyncSession
from typer.testing import CliRunner

from hub import store
from hub.cli import app as cli
from hub.errors import UnknownRole
from tests.conftest import TOKEN_SECRET
from tests.dashboards.conftest import ReadOnly


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT token_hash FROM api_token",
        "SELECT token_hash FROM cluster",
        "SELECT credentials FROM repository",
        "SELECT * FROM status_transition",
        "SELECT * FROM fleet_cluster_state",
        "UPDATE grafana.environment SET position = 0",
        "DELETE FROM grafana.workspace",
        "INSERT INTO grafana.environment (name) VALUES ('x')",
        "DELETE FROM cluster",
        "CREATE TABLE grafana.mine (x int)",
        "CREATE VIEW grafana.mine AS SELECT 1",
    ],
)
async def test_the_role_reads_no_table_and_writes_nothing(
    readonly: ReadOnly, statement: str
) -> None:
    with pytest.raises(ProgrammingError, match="permission denied"):
        await readonly.rows(statement)


async def test_the_role_reads_the_views_and_no_credentials(
    readonly: ReadOnly, session: AsyncSession
) -> None:
    await session.execute(
        text(
            "INSERT INTO repository (url, clone_url, role, credentials) VALUES "
            "('https://git.example/platform', 'https://bot:hunter2@git.example/platform', "
            "'platform', '{\"password_file\": \"/secret\"}')"
        )
    )
    [repository] = await readonly.rows("SELECT * FROM grafana.repository")
    assert repository["url"] == "https://git.example/platform"
    assert "hunter2" not in str(repository)
    assert "/secret" not in str(repository)
    assert "credentials" not in repository
    assert "clone_url" not in repository


async def test_views_added_later_are_granted_as_they_come(
    readonly: ReadOnly, session: AsyncSession
) -> None:
    await session.execute(text("CREATE VIEW grafana.later AS SELECT count(*) AS n FROM cluster"))
    assert await readonly.rows("SELECT n FROM grafana.later") == [{"n": 0}]


async def test_granting_twice_changes_nothing(readonly: ReadOnly, session: AsyncSession) -> None:
    def privileges() -> str:
        return (
            "SELECT count(*) FROM information_schema.role_table_grants "
            f"WHERE grantee = '{readonly.role}'"
        )

    before = await session.scalar(text(privileges()))
    await store.grant_readonly(session, readonly.role)
    assert await session.scalar(text(privileges())) == before
    assert before is not None
    assert before > 10


async def test_an_unknown_role_is_refused_by_name(session: AsyncSession) -> None:
    with pytest.raises(UnknownRole, match=r"no role 'grafana_nobody'.*create it first"):
        await store.grant_readonly(session, "grafana_nobody")


@pytest.fixture
def role_database(
    migrated_database: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[str, str]]:
    """A migrated database the command commits to, and a role made on its server for the
    test (dropped after it)."""
    url = migrated_database
    monkeypatch.setenv("FLEETMARK_MODE", "development")
    monkeypatch.setenv("FLEETMARK_TOKEN_SECRET", TOKEN_SECRET)
    monkeypatch.setenv("FLEETMARK_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("FLEETMARK_DATABASE_URL", url)
    role = f"grafana_cli_{uuid.uuid4().hex[:12]}"
    engine = create_engine(url, poolclass=pool.NullPool, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'CREATE ROLE "{role}" NOLOGIN'))
    try:
        yield url, role
    finally:
        with engine.connect() as connection:
            connection.execute(text(f'DROP OWNED BY "{role}"'))
            connection.execute(text(f'DROP ROLE "{role}"'))
        engine.dispose()


def test_fleetmark_db_grant_readonly(role_database: tuple[str, str]) -> None:
    url, role = role_database

    granted = CliRunner().invoke(cli, ["db", "grant-readonly", role])
    again = CliRunner().invoke(cli, ["db", "grant-readonly", role])
    unknown = CliRunner().invoke(cli, ["db", "grant-readonly", "grafana_nobody"])

    assert granted.exit_code == 0, granted.output
    assert f"{role} may read schema grafana" in granted.output
    assert again.exit_code == 0, again.output
    assert unknown.exit_code == 2
    assert "no role 'grafana_nobody'" in unknown.output
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            # What PostgreSQL applies to the role's sessions in this database as they log in:
            # the dashboards' reads are not compiled first.
            settings = connection.execute(
                text(
                    "SELECT s.setconfig FROM pg_db_role_setting s "
                    "JOIN pg_roles r ON r.oid = s.setrole "
                    "JOIN pg_database d ON d.oid = s.setdatabase "
                    "WHERE r.rolname = :role AND d.datname = current_database()"
                ),
                {"role": role},
            ).scalar()
            assert settings == ["jit=off"]
            connection.execute(text(f'SET ROLE "{role}"'))
            clusters = connection.execute(text("SELECT count(*) FROM grafana.cluster")).scalar()
            assert clusters == 0
            with pytest.raises(ProgrammingError, match="permission denied"):
                connection.execute(text("SELECT * FROM api_token"))
    finally:
        engine.dispose()
