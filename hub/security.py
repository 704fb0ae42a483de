"""Tokens: generated once, shown once, stored only as a keyed hash."""

import hashlib
import hmac
import secrets

CLUSTER_TOKEN_PREFIX = "fmc_"  # noqa: S105 - a prefix, not a secret
API_TOKEN_PREFIX = "fma_"  # noqa: S105 - a prefix, not a secret


def new_token(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def hash_token(secret: str, token: str) -> str:
    return hmac.new(secret.encode(), token.encode(), hashlib.sha256).hexdigest()
