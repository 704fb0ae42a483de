"""The jobs' rounds in a view of schema `grafana`: when each background job of the hub ran and
how it went, for the alert rule that fires when a job has not succeeded for several of its
intervals (dashboards/alerts.py).

The store tells what no replica's own memory can (0024): a job's last success, whichever
replica ran it, and its silence when no replica runs it at all; a run asked for through the
API (`requested`, `running` until it ends) is a round too, as /metrics counts it. The error
of a failed round is left out: it is the hub's log line, which may name what Grafana's
read-only role need not see.

Revision ID: 0037_job_run_view
Revises: 0036_metrics_token_scope
Create Date: 2026-11-30 10:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0037_job_run_view"
down_revision: str | None = "0036_metrics_token_scope"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE VIEW grafana.job_run AS "
        "SELECT job, outcome, requested, started_at, finished_at FROM job_run"
    )
    op.execute(
        "COMMENT ON VIEW grafana.job_run IS "
        "'The newest rounds of each hub job and outcome, and the runs asked for (requested).'"
    )


def downgrade() -> None:
    op.execute("DROP VIEW grafana.job_run")
