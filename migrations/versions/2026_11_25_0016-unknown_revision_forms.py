"""Objects whose applied revision is of no known form keep no version.

Ingest used to keep such a revision (`main@sha1:1234567`, `latest`) as an opaque version;
it now keeps none, so that drift, like the promotion gate, judges the object
`unknown_revision` and says the revision matches no known form, rather than taking it for a
chart version (`no_commit`). Stored objects are brought in line here, by the same forms as
`hub.revisions`: a commit (which has a sha), an OCI digest, or a chart version.

Revision ID: 0016_unknown_revision_forms
Revises: 0015_snapshot_parts
Create Date: 2026-11-25 23:55:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016_unknown_revision_forms"
down_revision: str | None = "0015_snapshot_parts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(r"""
        UPDATE object_state SET applied_version = NULL
        WHERE applied_sha IS NULL
          AND applied_version = btrim(applied_revision)
          AND btrim(applied_revision)
              !~ '^v?[0-9]+(\.[0-9]+)*(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$'
          AND btrim(applied_revision) !~* '^([^@]+@)?sha256:[0-9a-f]{64}$'
    """)


def downgrade() -> None:
    op.execute("""
        UPDATE object_state SET applied_version = btrim(applied_revision)
        WHERE applied_sha IS NULL AND applied_version IS NULL
          AND COALESCE(btrim(applied_revision), '') <> ''
    """)
