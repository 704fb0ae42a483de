"""Alembic environment: migrates the connection hub.migrate hands over, or the hub's database."""

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from hub.models import Base

config = context.config


def run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=Base.metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    run(connection)
else:  # `alembic revision --autogenerate` while authoring a migration
    from hub.database import resolve_database_url
    from hub.settings import HubSettings

    engine = create_engine(resolve_database_url(HubSettings()), poolclass=pool.NullPool)
    with engine.connect() as conn:
        run(conn)
    engine.dispose()
