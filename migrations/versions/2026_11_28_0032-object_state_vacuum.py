"""Objects vacuumed soon after they change, so that the gate's index-only scan stays one.

The gate reads the objects that follow a branch from ix_object_state_source alone (0031),
but only where their heap pages are marked all-visible; a rollout changes one object of each
of the environment's clusters, on a page of its own each, and until vacuum marks those pages
again every answer reads them from the heap, and walks the index entries the updates left
behind. At PostgreSQL's default (a fifth of the table changed) that waits for some 40,000
changed objects at 10,000 clusters, and a rollout through prod makes some 14,000. Now
1,000 and 1 % of the rest suffice (about 3,000), and autovacuum looks once a minute: under a
fleet's load (benchmarks/fleet.py --replicas 2) the gate's p99 went from 162 ms to 109-149.

Revision ID: 0032_object_state_vacuum
Revises: 0031_gate_covering_index
Create Date: 2026-11-28 16:30:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0032_object_state_vacuum"
down_revision: str | None = "0031_gate_covering_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE object_state SET "
        "(autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000)"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE object_state RESET "
        "(autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold)"
    )
