"""API tokens for people and automation (admin, read or metrics scope), and the sign-ins
to the pages made from them."""

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from hub.models.base import Base, created_at_column


class ApiToken(Base):
    __tablename__ = "api_token"
    __table_args__ = (CheckConstraint("scope IN ('admin', 'read', 'metrics')", name="scope"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(253), unique=True)
    scope: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = created_at_column()
    revoked_at: Mapped[datetime | None]


class PageSignIn(Base):
    """A browser signed in to the pages with an API token: the cookie holds a random id, only
    its keyed hash is stored. Sign-out deletes the row; so does revoking the token."""

    __tablename__ = "page_sign_in"
    __table_args__ = (Index(None, "expires_at"),)

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    api_token_id: Mapped[int] = mapped_column(
        ForeignKey("api_token.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = created_at_column()
    expires_at: Mapped[datetime]
