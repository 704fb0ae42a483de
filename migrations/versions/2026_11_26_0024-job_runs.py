"""Job runs: when each background job of the hub last ran, how it went and how long it took.

Every replica runs the jobs' schedule and one at a time does a round (an advisory lock), so no
replica can tell from its own memory when a job last ran: the replica that answers a
Prometheus scrape may not be the one that ran it. Each round is therefore written to
`job_run` by the replica that did it, succeeded, failed (with the error) or skipped (another
replica held the lock), and `/metrics` on any replica reads the newest of each job and
outcome. Only the newest rows of each job and outcome are kept (the hub deletes older ones as
it writes), so the table stays a few hundred rows however long the hub runs, and the last
success survives any number of skipped rounds.

Revision ID: 0024_job_runs
Revises: 0023_dashboard_views
Create Date: 2026-11-26 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024_job_runs"
down_revision: str | None = "0023_dashboard_views"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_run",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("job", sa.String(length=32), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "outcome IN ('succeeded', 'failed', 'skipped')",
            name=op.f("ck_job_run_known_outcome"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_run")),
    )
    op.create_index(
        op.f("ix_job_run_job_outcome_finished_at"),
        "job_run",
        ["job", "outcome", "finished_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_job_run_job_outcome_finished_at"), table_name="job_run")
    op.drop_table("job_run")
