"""The readiness turns look an object's state before up by its cluster too, so that on
TimescaleDB the lookup finds its batch through the compressed chunk's index.

`readiness_turns` (0053_readiness_turn) looks up the transition before an object's first one of
the range by `object_id` alone. A compressed chunk has no index on it: its only index is the
one TimescaleDB builds on the order-by columns' first and last values, led by `cluster_id`.
So each lookup read all of a compressed chunk's batches (640 pages a week at 10,000 clusters),
and the readiness job's first round over 90 days judged a day in about a minute. Naming the
object's cluster (its own, so the rows are the same) lets the lookup use that index: the
same day took 15 s. Plain PostgreSQL finds the row through the object's index as before.

Revision ID: 0057_readiness_lookup
Revises: 0056_ingest_triggers
Create Date: 2026-12-10 10:00:00
"""

from collections.abc import Sequence
from importlib import import_module

from alembic import op

revision: str = "0057_readiness_lookup"
down_revision: str | None = "0056_ingest_triggers"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

READINESS = import_module("migrations.versions.2026_12_06_0053-readiness_turn")

_BY_OBJECT = "WHERE q.object_id = m.object_id AND"
TURNS = READINESS.TURNS.replace(
    _BY_OBJECT, "WHERE q.cluster_id = m.cluster_id AND q.object_id = m.object_id AND"
)
assert TURNS != READINESS.TURNS, "0053's lookup is not where it was"


def _replace(turns: str) -> None:
    op.execute(turns.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))


def upgrade() -> None:
    _replace(TURNS)


def downgrade() -> None:
    _replace(READINESS.TURNS)
