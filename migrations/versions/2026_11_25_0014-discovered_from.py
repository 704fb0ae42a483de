"""Repositories remember the repository they were discovered in.

A repository named by a reconciler manifest (a Flux GitRepository, an Argo CD Application) is
discovered when the platform repository holding that manifest is harvested. Repository
content must not point the hub at its own files: a discovered local repository (a file URL or
a path) is fetched only when the repository it was discovered in is itself local, which the
harvest checks each time it fetches, so it needs to know that repository.

Filled here from the assignments that name each discovered repository; where a remote
platform repository and a local one both name it, the remote one is taken, so that nothing
discovered before this revision is fetched on a weaker rule than what comes after.

Revision ID: 0014_discovered_from
Revises: 0013_url_ref
Create Date: 2026-11-25 23:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_discovered_from"
down_revision: str | None = "0013_url_ref"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("repository", sa.Column("discovered_from_id", sa.Integer(), nullable=True))
    op.create_foreign_key(
        op.f("fk_repository_discovered_from_id_repository"),
        "repository",
        "repository",
        ["discovered_from_id"],
        ["id"],
        ondelete="SET NULL",
    )
    op.execute("""
        UPDATE repository AS discovered
        SET discovered_from_id = origin.repository_id
        FROM (
            SELECT DISTINCT ON (revision.app_repository_id)
                revision.app_repository_id, assignment.repository_id
            FROM assignment_revision AS revision
            JOIN assignment ON assignment.id = revision.assignment_id
            JOIN repository AS platform ON platform.id = assignment.repository_id
            ORDER BY revision.app_repository_id,
                     platform.clone_url LIKE '/%' OR platform.clone_url ILIKE 'file:%',
                     assignment.repository_id
        ) AS origin
        WHERE discovered.source = 'discovered' AND discovered.id = origin.app_repository_id
    """)


def downgrade() -> None:
    op.drop_constraint(
        op.f("fk_repository_discovered_from_id_repository"), "repository", type_="foreignkey"
    )
    op.drop_column("repository", "discovered_from_id")
