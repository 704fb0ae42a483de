"""The stale-after a drift round judged with: `drift_evaluation.stale_after`.

A round looks for the clusters whose periods may be due a change though no verdict of theirs
changed, among them those stale now that the last round did not count stale. It reckoned the
last round's stale line (the time before which a report counted as stale) with its own
setting. After a shorter FLEETMARK_STALE_AFTER_SECONDS it missed a cluster whose last report
fell between the two lines, once an open period of the cluster said stale: its objects' stale
periods waited for the next full pass. Each round's setting is now kept, and the next round
reckons the last round's line with it. The first round after this revision finds none kept,
and judges every object as a full pass does.

Revision ID: 0061_drift_stale_after
Revises: 0060_cluster_placed_at
Create Date: 2026-12-14 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0061_drift_stale_after"
down_revision: str | None = "0060_cluster_placed_at"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("drift_evaluation", sa.Column("stale_after", sa.Interval()))


def downgrade() -> None:
    op.drop_column("drift_evaluation", "stale_after")
