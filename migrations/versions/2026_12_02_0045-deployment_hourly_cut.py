"""The deployment rollup reaches into the hour under way: each rollup run rolls it up to a cut
a little before the run, so dashboards aggregate at most a run's interval of raw changes.

`deployment_hourly` read the whole hour under way from `deployment_history`: up to an hour of
changes, looked up and named one by one (100-250 ms at 10,000 clusters in a rollout). The
rollup job now also rolls up that hour from its start to the cut (store.refresh_rollups), and
the view reads the raw changes from the cut on. While the job recomputes, it bounds the raw
changes the view reads by `rollup_watermark.read_until` (NULL, no bound, outside the job's
transaction), so that the hour under way is rolled up to the cut and no further. An hour under
way then has two rows per name and revisions, before and after the cut; readers sum them, and a
cluster that changes on both sides of the cut counts on each, as one that changes in two hours
counts in each. Same columns.

Revision ID: 0045_deployment_hourly_cut
Revises: 0044_event_outbox
Create Date: 2026-12-02 12:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0045_deployment_hourly_cut"
down_revision: str | None = "0044_event_outbox"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WATERMARK = "rollup_watermark_of('deployment_hourly')"


def _view(until: str) -> str:
    """0039's view, its raw changes read up to `until`."""
    return f"""
        CREATE OR REPLACE VIEW deployment_hourly AS
        SELECT hour, environment_id, cluster_type_id, name, from_revision, to_revision, changes,
               clusters, not_ready, first_at, last_at
        FROM deployment_hourly_rollup WHERE hour < {WATERMARK}
        UNION ALL
        SELECT date_bin(INTERVAL '1 hour', d.deployed_at, TIMESTAMPTZ '2000-01-01 UTC'),
               COALESCE(d.environment_id, 0)::integer, COALESCE(d.cluster_type_id, 0)::integer,
               d.name::text,
               COALESCE(d.previous_version, left(d.previous_sha, 12))::text,
               COALESCE(d.applied_version, left(d.applied_sha, 12))::text,
               count(*), count(DISTINCT d.cluster_id), count(*) FILTER (WHERE d.ready IS FALSE),
               min(d.deployed_at), max(d.deployed_at)
        FROM deployment_history d
        WHERE d.deployed_at >= {WATERMARK}{until}
        GROUP BY 1, 2, 3, 4, 5, 6;
    """


def upgrade() -> None:
    # A stable function as rollup_watermark_of (0030), so that the planner bounds the history's
    # time index with its value.
    op.execute(f"""
        ALTER TABLE rollup_watermark ADD COLUMN read_until timestamptz;
        CREATE FUNCTION rollup_read_until_of(rollup text) RETURNS timestamptz
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
            SELECT COALESCE(
                (SELECT read_until FROM rollup_watermark WHERE name = rollup), 'infinity')
        $$;
        {_view(" AND d.deployed_at < rollup_read_until_of('deployment_hourly')")}
    """)


def downgrade() -> None:
    # The rows rolled up to a cut are rolled up again from the hour they are in.
    op.execute(f"""
        DELETE FROM deployment_hourly_rollup
        WHERE hour >= date_bin(INTERVAL '1 hour', {WATERMARK}, TIMESTAMPTZ '2000-01-01 UTC');
        UPDATE rollup_watermark
        SET materialized_until = date_bin(
            INTERVAL '1 hour', materialized_until, TIMESTAMPTZ '2000-01-01 UTC')
        WHERE name = 'deployment_hourly';
        {_view("")}
        DROP FUNCTION rollup_read_until_of(text);
        ALTER TABLE rollup_watermark DROP COLUMN read_until;
    """)
