"""Requested runs told apart from periodic rounds, so that each is kept by its own rule.

Periodic rounds keep the newest 20 of each job and outcome; a run asked for through the API
(`POST /api/v1/runs/...`) is kept a day, at most 1,000 per job (hub/runs/service.py).
Sharing the first rule, a burst of requests lost the runs' records while their callers
still polled them. Rows written before this revision are taken as requested when they carry
a result or run still (a requested run that failed cannot be told from a failed round).

Revision ID: 0034_requested_runs_kept
Revises: 0033_claimed_placement
Create Date: 2026-11-29 01:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0034_requested_runs_kept"
down_revision: str | None = "0033_claimed_placement"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "job_run",
        sa.Column("requested", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    op.execute(
        "UPDATE job_run SET requested = true WHERE result IS NOT NULL OR outcome = 'running'"
    )


def downgrade() -> None:
    op.drop_column("job_run", "requested")
