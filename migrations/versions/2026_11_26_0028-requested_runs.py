"""Requested runs: a harvest or a scheduling run asked for through the API is a job run too.

`POST /api/v1/harvests` and `POST /api/v1/schedules` answer 202 at once and the run goes on in
the hub; the caller polls `GET /api/v1/runs/{id}` until it is done. That run is a round of the
job (`harvest`, `schedule`) like a periodic one, so it is recorded in `job_run` as those are,
and /metrics counts it: the row is written when the run starts (outcome `running`, no
`finished_at` yet) and completed when it ends, with what the run did (`result`, the report the
CLI prints) or why it failed (`error`).

Revision ID: 0028_requested_runs
Revises: 0027_promotion_gates
Create Date: 2026-11-26 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0028_requested_runs"
down_revision: str | None = "0027_promotion_gates"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("job_run", sa.Column("result", postgresql.JSONB(), nullable=True))
    op.alter_column("job_run", "finished_at", nullable=True)
    op.drop_constraint(op.f("ck_job_run_known_outcome"), "job_run", type_="check")
    op.create_check_constraint(
        op.f("ck_job_run_known_outcome"),
        "job_run",
        "outcome IN ('running', 'succeeded', 'failed', 'skipped')",
    )
    op.create_check_constraint(
        op.f("ck_job_run_finished_unless_running"),
        "job_run",
        "(outcome = 'running') = (finished_at IS NULL)",
    )


def downgrade() -> None:
    op.execute("DELETE FROM job_run WHERE outcome = 'running'")
    op.drop_constraint(op.f("ck_job_run_finished_unless_running"), "job_run", type_="check")
    op.drop_constraint(op.f("ck_job_run_known_outcome"), "job_run", type_="check")
    op.create_check_constraint(
        op.f("ck_job_run_known_outcome"),
        "job_run",
        "outcome IN ('succeeded', 'failed', 'skipped')",
    )
    op.alter_column("job_run", "finished_at", nullable=False)
    op.drop_column("job_run", "result")
