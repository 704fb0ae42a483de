"""Objects by the ref of the repository whose revisions they apply.

A Flux Kustomization names its GitRepository, which holds the URL and branch; the agent now
links both into the Kustomization's record (`source.url_ref` beside `source.url`). Ingest
keeps that ref as `url_ref`: an object's own ref when its record links none (an Argo CD
Application's), none for a Flux source object (it fetches and applies nothing). The
promotion gate, drift and the environment diff's summary (deployed_summary) then find the
objects that apply a branch by (source_url, url_ref), rather than by joining each Flux object
to the source object it names: the gate with one walk of ix_object_state_source, now on those
two. The index of Flux objects by the source object they name (ix_object_state_followers)
goes.

Filled here from what is stored, as the agent links it: a Flux object gets the ref of the
GitRepository or OCIRepository it names in its cluster, if there is one.

Revision ID: 0013_url_ref
Revises: 0012_drift_totals
Create Date: 2026-11-25 19:00:00
"""

from collections.abc import Sequence
from types import ModuleType

import sqlalchemy as sa
from alembic import context, op
from alembic.script import ScriptDirectory

revision: str = "0013_url_ref"
down_revision: str | None = "0012_drift_totals"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SOURCE_KINDS = "('GitRepository', 'OCIRepository', 'Bucket', 'HelmRepository', 'HelmChart')"


def _deployed_summary(*, by_url_ref: bool) -> str:
    """0010's deployed_summary, which joined each Flux object to the source object it names
    for the URL and ref; with `by_url_ref`, it takes both from the object, which carries them
    now."""
    script = ScriptDirectory.from_config(context.config).get_revision("0010_deployed_parts")
    assert script is not None
    module: ModuleType = script.module
    summary = str(module.DEPLOYED_SUMMARY).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
    if not by_url_ref:
        return summary
    joined = summary.index("    LEFT JOIN object_state s\n")
    after = summary.index("\n", summary.index("AND s.removed_at IS NULL", joined)) + 1
    summary = summary[:joined] + summary[after:]
    followed = (
        "COALESCE(o.source_url, s.source_url) AS source_url,\n"
        "           COALESCE(s.source_ref, o.source_ref) AS source_ref,"
    )
    assert summary.count(followed) == 1
    return summary.replace(followed, "o.source_url, o.url_ref AS source_ref,")


def upgrade() -> None:
    op.add_column("object_state", sa.Column("url_ref", sa.String(), nullable=True))
    op.add_column("status_transition", sa.Column("url_ref", sa.String(), nullable=True))
    op.execute(f"""
        UPDATE object_state o SET url_ref = COALESCE(
            (SELECT s.source_ref FROM object_state s
             WHERE o.reconciler = 'flux' AND s.cluster_id = o.cluster_id
               AND s.reconciler = 'flux' AND s.kind = split_part(o.source_ref, '/', 1)
               AND s.namespace = split_part(o.source_ref, '/', 2)
               AND s.name = split_part(o.source_ref, '/', 3)
               AND s.kind IN ('GitRepository', 'OCIRepository') AND s.source_url IS NOT NULL),
            o.source_ref)
        WHERE o.source_ref IS NOT NULL
          AND NOT (o.reconciler = 'flux' AND o.kind IN {SOURCE_KINDS})
    """)
    op.drop_index("ix_object_state_source", table_name="object_state")
    op.create_index("ix_object_state_source", "object_state", ["source_url", "url_ref"])
    op.drop_index("ix_object_state_followers", table_name="object_state")
    op.execute(_deployed_summary(by_url_ref=True))


def downgrade() -> None:
    op.execute(_deployed_summary(by_url_ref=False))
    op.create_index(
        "ix_object_state_followers",
        "object_state",
        ["source_ref", "cluster_id"],
        postgresql_where=sa.text("reconciler = 'flux'"),
    )
    op.drop_index("ix_object_state_source", table_name="object_state")
    op.create_index("ix_object_state_source", "object_state", ["source_url", "source_ref"])
    op.drop_column("status_transition", "url_ref")
    op.drop_column("object_state", "url_ref")
