"""The timeline's health rows read the readiness turns the `readiness` job keeps, and count only
the newest minutes from the status transitions.

`timeline_health` (0052_timeline) judged every transition of its range when asked: an object's
first change of the range looks its state before up, one index probe and a heap fetch each,
which at 10,000 clusters made the last hour's first page take some 270 ms. What it judges per
5-minute bucket and cluster does not change once the bucket's reports are in, so
`readiness_turns(since, until)` says it, a row per bucket, cluster and direction (turned not
ready, `regressed`, or ready again) with whether one of the objects was failing (Ready false)
and the reasons of those that turned not ready; `readiness_turn` keeps those rows of the
buckets before the watermark `readiness_turn` in `rollup_watermark`, which the job moves on,
each round judging again the 15 minutes before it for the reports that came in late.
`timeline_health` sums the kept rows before the watermark and judges from it on: the same
rows as before, the kept ones as of the job's last round. A plain table on every backend, as
the other rollup tables; the retention job drops its buckets older than the history's
retention.

Revision ID: 0053_readiness_turn
Revises: 0052_timeline
Create Date: 2026-12-06 10:00:00
"""

from collections.abc import Sequence
from importlib import import_module

from alembic import op

revision: str = "0053_readiness_turn"
down_revision: str | None = "0052_timeline"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMELINE = import_module("migrations.versions.2026_12_05_0052-timeline")
WATERMARK = "rollup_watermark_of('readiness_turn')"

# 0052's judging of the transitions, read in [since, until + 5 minutes) for the buckets that
# start in [since, until) (its CTEs `moved` and `judged`, for any workload), per bucket, cluster
# and direction. The reasons are those of the objects that turned not ready ('(none)' for none
# given), NULL for a recovery.
_JUDGED = (
    TIMELINE.HEALTH.split("\nchanged AS (", 1)[0]
    .replace("\n      AND p_workload IS NULL", "")
    .rstrip(",")
)
TURNS = f"""
CREATE FUNCTION readiness_turns(since timestamptz, until timestamptz)
RETURNS TABLE (bucket timestamptz, cluster_id integer, regressed boolean, failing boolean,
               reasons text[])
LANGUAGE sql STABLE AS $${_JUDGED}
SELECT bucket, cluster_id, was_ready, bool_or(ready IS FALSE),
       CASE WHEN was_ready
            THEN array_agg(DISTINCT COALESCE(reason, '(none)') ORDER BY COALESCE(reason, '(none)'))
       END
FROM judged
WHERE (ready IS TRUE) <> was_ready
GROUP BY bucket, cluster_id, was_ready
$$
"""

TABLE = """
CREATE TABLE readiness_turn (
    bucket timestamptz NOT NULL,
    cluster_id integer NOT NULL,
    regressed boolean NOT NULL,
    failing boolean NOT NULL,
    reasons text[],
    PRIMARY KEY (bucket, cluster_id, regressed)
)
"""

# 0052's rows from the turns: those kept before the watermark, those judged from it on.
HEALTH = f"""
WITH changed AS (
    SELECT r.bucket, k.environment, k.cluster_type, r.cluster_id, r.regressed, r.failing,
           r.reasons
    FROM (
        SELECT t.bucket, t.cluster_id, t.regressed, t.failing, t.reasons
        FROM readiness_turn t
        WHERE t.bucket >= since AND t.bucket < LEAST(until, {WATERMARK})
        UNION ALL
        SELECT * FROM readiness_turns(GREATEST(since, {WATERMARK}), until)
    ) AS r
    JOIN timeline_clusters(p_environment, p_cluster_type, p_cluster, p_selector) k
      ON k.id = r.cluster_id
    WHERE p_workload IS NULL
),
reasons AS (
    SELECT bucket, environment,
           jsonb_agg(jsonb_build_object('reason', reason, 'clusters', clusters)
                     ORDER BY clusters DESC, reason) FILTER (WHERE rank <= 3) AS commonest
    FROM (
        SELECT c.bucket, c.environment, x.reason, count(*) AS clusters,
               row_number() OVER (PARTITION BY c.bucket, c.environment
                                  ORDER BY count(*) DESC, x.reason) AS rank
        FROM changed c CROSS JOIN LATERAL unnest(c.reasons) AS x (reason)
        WHERE c.regressed
        GROUP BY c.bucket, c.environment, x.reason
    ) AS counted
    GROUP BY bucket, environment
),
turned AS (
    SELECT bucket, environment, regressed AS was_ready,
           array_agg(DISTINCT cluster_type ORDER BY cluster_type)
               FILTER (WHERE cluster_type IS NOT NULL) AS cluster_types,
           count(*) AS clusters, count(*) FILTER (WHERE failing) AS failing
    FROM changed
    GROUP BY bucket, environment, regressed
)
SELECT t.bucket,{TIMELINE.HEALTH.split("SELECT t.bucket,", 1)[1]}"""


def _replace_health(body: str) -> None:
    """timeline_health with this body; timeline() names it, so it is replaced in place."""
    function = TIMELINE._function("timeline_health", body)
    op.execute(function.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))


def upgrade() -> None:
    op.execute(TABLE)
    op.execute("INSERT INTO rollup_watermark (name) VALUES ('readiness_turn')")
    op.execute(TURNS)
    _replace_health(HEALTH)


def downgrade() -> None:
    _replace_health(TIMELINE.HEALTH)
    op.execute("DROP FUNCTION readiness_turns(timestamptz, timestamptz)")
    op.execute("DELETE FROM rollup_watermark WHERE name = 'readiness_turn'")
    op.execute("DROP TABLE readiness_turn")
