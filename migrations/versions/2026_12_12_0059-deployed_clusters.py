"""Environment diff: the deployed summary refreshed for the clusters that changed.

0010's refresh read every live object of the fleet each round, a part at a time: at 10,000
clusters some 3.5 s, though a minute of reports touches a hundred clusters or so. Those are
spread over nearly every part, so refreshing only the parts they lie in would read nearly as
much. Here `deployed_cluster` keeps what each cluster runs (0010's per-cluster rows, each with
its version resolved, and a `member` row placing the cluster); the job reads the objects of
the clusters that changed only, and sums up their parts from `deployed_cluster`, which reads
no object and resolves no version (hub/envdiff/repository.py, where its SQL now lives:
deployed_summary goes). `deployed_refresh` says when the job last refreshed the summary and
last read every cluster; deployed_version takes its `refreshed_at` from there, so a round
that sums up a few parts needs no write to the others to say they hold as of it. Until the
first round, deployed_version keeps the parts as they were refreshed; the first round reads
every cluster (no `full_at` yet), filling `deployed_cluster`.

Revision ID: 0059_deployed_clusters
Revises: 0058_drift_increments
Create Date: 2026-12-12 10:00:00
"""

from collections.abc import Sequence
from types import ModuleType

import sqlalchemy as sa
from alembic import context, op
from alembic.script import ScriptDirectory

revision: str = "0059_deployed_clusters"
down_revision: str | None = "0058_drift_increments"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SUMMED = """environment_id, cluster_type, source_url, source_ref, source_path, applied_sha,
       applied_version, condition, version"""

DEPLOYED_VERSION = f"""
CREATE VIEW deployed_version AS
SELECT {_SUMMED}, sum(p.clusters)::bigint AS clusters, min(p.message) AS message,
       r.refreshed_at
FROM deployed_part p
CROSS JOIN deployed_refresh r
GROUP BY {_SUMMED}, r.refreshed_at
"""

COMMENTS = {
    "TABLE deployed_cluster": (
        "What one cluster runs, as the hub last read its objects: a row per source, applied "
        "commit and condition (as deployed_version), and a member row with its placement."
    ),
    "TABLE deployed_part": (
        "deployed_version of the clusters of one part of the fleet (a range of cluster ids), "
        "summed up from deployed_cluster; deployed_version adds the parts up."
    ),
}


def _revision(name: str) -> ModuleType:
    script = ScriptDirectory.from_config(context.config).get_revision(name)
    assert script is not None
    return script.module


def _comment(target: str, comment: str) -> None:
    quoted = comment.replace("'", "''")
    op.execute(f"COMMENT ON {target} IS '{quoted}'")


def upgrade() -> None:
    op.create_table(
        "deployed_cluster",
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=True),
        sa.Column("cluster_type", sa.String(length=63), nullable=True),
        sa.Column("source_url", sa.String(), nullable=True),
        sa.Column("source_ref", sa.String(), nullable=True),
        sa.Column("source_path", sa.Text(), nullable=True),
        sa.Column("applied_sha", sa.String(), nullable=True),
        sa.Column("applied_version", sa.String(), nullable=True),
        sa.Column("condition", sa.Text(), nullable=False),
        sa.Column("version", sa.String(), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
    )
    op.create_index("ix_deployed_cluster_cluster_id", "deployed_cluster", ["cluster_id"])
    op.create_index(
        "ix_deployed_cluster_member",
        "deployed_cluster",
        ["cluster_id"],
        postgresql_include=["environment_id", "cluster_type"],
        postgresql_where=sa.text("condition = 'member'"),
    )
    op.create_table(
        "deployed_refresh",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("refreshed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("full_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("id = 1", name=op.f("ck_deployed_refresh_single_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deployed_refresh")),
    )
    op.execute(
        "INSERT INTO deployed_refresh (id, refreshed_at) "
        "SELECT 1, min(refreshed_at) FROM deployed_part HAVING count(*) > 0"
    )
    op.execute("DROP VIEW deployed_version")
    op.drop_column("deployed_part", "refreshed_at")
    op.execute(DEPLOYED_VERSION)
    op.execute("DROP FUNCTION deployed_summary(integer, integer)")
    deployed_parts = _revision("0010_deployed_parts")
    _comment("VIEW deployed_version", deployed_parts.COMMENTS["VIEW deployed_version"])
    for target, comment in COMMENTS.items():
        _comment(target, comment)


def downgrade() -> None:
    deployed_parts = _revision("0010_deployed_parts")
    op.execute(_revision("0013_url_ref")._deployed_summary(by_url_ref=True))
    op.execute("DROP VIEW deployed_version")
    op.add_column(
        "deployed_part", sa.Column("refreshed_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.execute(
        "UPDATE deployed_part SET refreshed_at = "
        "COALESCE((SELECT refreshed_at FROM deployed_refresh), now())"
    )
    op.alter_column("deployed_part", "refreshed_at", nullable=False)
    op.execute(deployed_parts.DEPLOYED_VERSION)
    for target, comment in deployed_parts.COMMENTS.items():
        _comment(target, comment)
    op.drop_table("deployed_refresh")
    op.drop_index("ix_deployed_cluster_member", table_name="deployed_cluster")
    op.drop_index("ix_deployed_cluster_cluster_id", table_name="deployed_cluster")
    op.drop_table("deployed_cluster")
