"""Deployment history: the lookup of an object's previous applied revision also says, plainly,
that it is no newer than the change it precedes.

The lookup compared (observed_at, received_at) as a pair, which TimescaleDB cannot turn into a
bound on its chunks: every lookup probed each newer chunk of the hypertable, compressed ones
included, before it could stop at the nearest earlier one. `s.observed_at <= t.observed_at`,
which the pair comparison implies, is such a bound: chunks newer than the change are skipped
at run time. Same columns and rows; on plain PostgreSQL the index scan is the same.

Revision ID: 0021_history_lookup_bound
Revises: 0020_dora_rollouts
Create Date: 2026-11-26 03:00:00
"""

from collections.abc import Sequence
from types import ModuleType

from alembic import context, op
from alembic.script import ScriptDirectory

revision: str = "0021_history_lookup_bound"
down_revision: str | None = "0020_dora_rollouts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PAIR = "      AND (s.observed_at, s.received_at) < (t.observed_at, t.received_at)\n"


def _deployment_history_0009() -> str:
    """0009's view, as that migration defines it."""
    script = ScriptDirectory.from_config(context.config).get_revision("0009_history_lookup")
    assert script is not None
    module: ModuleType = script.module
    view = str(module.DEPLOYMENT_HISTORY)
    assert view.count(PAIR) == 1
    return view


def upgrade() -> None:
    # Replaced in place, so the comment and any grants to dashboard readers stay.
    bound = "      AND s.observed_at <= t.observed_at\n" + PAIR
    op.execute(_deployment_history_0009().replace(PAIR, bound))


def downgrade() -> None:
    op.execute(_deployment_history_0009())
