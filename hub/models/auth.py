"""API tokens for people and automation (admin, read or metrics scope)."""

from datetime import datetime

from sqlalchemy import CheckConstraint, String
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
