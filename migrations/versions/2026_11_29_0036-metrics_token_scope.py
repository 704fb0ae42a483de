"""API tokens may have the scope `metrics`: they read /metrics and nothing else.

Revision ID: 0036_metrics_token_scope
Revises: 0035_page_sign_in
Create Date: 2026-11-29 10:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0036_metrics_token_scope"
down_revision: str | None = "0035_page_sign_in"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


CONSTRAINT = "ck_api_token_scope"


def upgrade() -> None:
    op.drop_constraint(op.f(CONSTRAINT), "api_token", type_="check")
    op.create_check_constraint(
        op.f(CONSTRAINT), "api_token", "scope IN ('admin', 'read', 'metrics')"
    )


def downgrade() -> None:
    op.execute("DELETE FROM api_token WHERE scope = 'metrics'")
    op.drop_constraint(op.f(CONSTRAINT), "api_token", type_="check")
    op.create_check_constraint(op.f(CONSTRAINT), "api_token", "scope IN ('admin', 'read')")
