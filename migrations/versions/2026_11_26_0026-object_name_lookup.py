"""Deployment history by object name finds the objects of a name from an index that ingest's
statements cannot use.

The lookup read every object's row (a sequential scan of object_state, some 100 ms at 10,000
clusters). An index on (name, id) answered it from the index alone, but ingest's statements
find an object by its key, name included, and with the index there the planner of a statement
prepared before the table had statistics chose it: a probe of every object of that name on every
cluster, and every report cost PostgreSQL three to six times the CPU (migration 0019).

This index keeps the name in the "C" collation. Equality is the same in any deterministic
collation, but the planner matches an index only to comparisons in the index's own collation:
ingest compares names in the column's, and only the history lookup, which compares
`name COLLATE "C"`, can use it.

Revision ID: 0026_object_name_lookup
Revises: 0024_job_runs
Create Date: 2026-11-26 13:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026_object_name_lookup"
down_revision: str | None = "0024_job_runs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_object_state_name_c", "object_state", [sa.text('name COLLATE "C"'), "id"])


def downgrade() -> None:
    op.drop_index("ix_object_state_name_c", table_name="object_state")
