"""Objects by the commit they apply: the members of a scope (`dora_member`) are found from the
commits of its branch, not from every object of the fleet.

`dora_member` joins the objects to the commits of the scope's branch by applied sha. Without
an index on it every call read all of object_state (200,000 rows at 10,000 clusters, some
100 ms), whatever the environment: the suspects of dev (1,000 clusters) took as long as those
of prod, and the DORA figures paid it per scope. With it, a probe per commit of the branch
finds its objects (dev's platform branch: 993 of 200,000).

Ingest finds an object by its key and never by its sha, so none of its statements can choose
it; it costs one more index entry per object written.

Revision ID: 0054_object_applied_sha
Revises: 0053_readiness_turn
Create Date: 2026-12-07 10:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0054_object_applied_sha"
down_revision: str | None = "0053_readiness_turn"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_object_state_applied_sha", "object_state", ["applied_sha"])


def downgrade() -> None:
    op.drop_index("ix_object_state_applied_sha", table_name="object_state")
