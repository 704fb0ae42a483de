"""Tokens: generated once, shown once, stored only as a keyed hash."""

import hashlib
import hmac
import re
import secrets

CLUSTER_TOKEN_PREFIX = "fmc_"  # noqa: S105 - a prefix, not a secret
API_TOKEN_PREFIX = "fma_"  # noqa: S105 - a prefix, not a secret
# A browser's sign-in to the pages (the cookie's value): a token of its own, never an API token.
SIGN_IN_PREFIX = "fms_"
# What new_token(API_TOKEN_PREFIX) makes: the prefix and 32 random bytes, base64url unpadded.
API_TOKEN_FORMAT = re.compile(r"fma_[A-Za-z0-9_-]{43}")


def new_token(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def hash_token(secret: str, token: str) -> str:
    return hmac.new(secret.encode(), token.encode(), hashlib.sha256).hexdigest()
