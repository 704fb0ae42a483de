"""Every revision form a reconciler writes, taken apart; and when two revisions are the same."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.revisions import Revision, parse_revision, same_revision
from tests.agent.examples import DIGEST, SHA_A, SHA_B

SHA256_COMMIT = DIGEST  # a commit of a SHA-256 Git repository looks like a digest's hex


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"main@sha1:{SHA_A}", Revision(ref="main", sha=SHA_A)),
        (f"refs/heads/main@sha1:{SHA_A}", Revision(ref="refs/heads/main", sha=SHA_A)),
        (f"v1.2.0@sha1:{SHA_A}", Revision(ref="v1.2.0", sha=SHA_A)),
        (f"main/{SHA_A}", Revision(ref="main", sha=SHA_A)),
        (f"feature/login/{SHA_A}", Revision(ref="feature/login", sha=SHA_A)),
        (f"sha1:{SHA_A}", Revision(sha=SHA_A)),
        (SHA_A, Revision(sha=SHA_A)),
        (SHA256_COMMIT, Revision(sha=SHA256_COMMIT)),
        (f"main/{SHA256_COMMIT}", Revision(ref="main", sha=SHA256_COMMIT)),
        (f"v1.2.3@sha256:{DIGEST}", Revision(version="v1.2.3", digest=f"sha256:{DIGEST}")),
        (f"latest@sha256:{DIGEST}", Revision(version="latest", digest=f"sha256:{DIGEST}")),
        (f"sha256:{DIGEST}", Revision(digest=f"sha256:{DIGEST}")),
        ("6.5.4", Revision(version="6.5.4")),
        ("1.2.3-rc.1+build.7", Revision(version="1.2.3-rc.1+build.7")),
        ("6.5.4+9f86d081884c", Revision(version="6.5.4+9f86d081884c")),
        (f"main@sha1:{SHA_A[:12]}", Revision(version=f"main@sha1:{SHA_A[:12]}")),
    ],
    ids=[
        "flux-branch",
        "flux-full-ref",
        "flux-tag",
        "legacy-branch",
        "legacy-branch-with-slash",
        "sha1-prefixed",
        "bare-sha1",
        "bare-sha256",
        "legacy-sha256",
        "oci-tag",
        "oci-latest",
        "digest-only",
        "helm-chart",
        "helm-prerelease",
        "helm-oci-chart",
        "short-sha-is-opaque",
    ],
)
def test_revision_forms(text: str, expected: Revision) -> None:
    assert parse_revision(text) == expected


def test_hex_is_lower_cased_and_whitespace_ignored() -> None:
    assert parse_revision(f"  main@SHA1:{SHA_A.upper()}\n") == Revision(ref="main", sha=SHA_A)


@pytest.mark.parametrize("text", [None, "", "   "])
def test_no_revision(text: str | None) -> None:
    assert parse_revision(text) == Revision()


@pytest.mark.parametrize(
    ("left", "right", "same"),
    [
        (f"main@sha1:{SHA_A}", SHA_A, True),
        (f"main/{SHA_A}", f"main@sha1:{SHA_A}", True),
        (SHA_A, SHA_B, False),
        (f"v1.2.3@sha256:{DIGEST}", f"sha256:{DIGEST}", True),
        ("6.5.4", "6.5.4", True),
        ("6.5.4", "6.5.5", False),
        (SHA_A, "6.5.4", False),
        (None, None, False),
        ("", SHA_A, False),
    ],
)
def test_same_revision(left: str | None, right: str | None, same: bool) -> None:
    assert same_revision(left, right) is same
    assert same_revision(right, left) is same


@settings(database=None, deadline=None)
@given(st.text())
def test_any_text_parses_and_equals_itself(text: str) -> None:
    parsed = parse_revision(text)

    assert isinstance(parsed, Revision)
    assert same_revision(text, text) is bool(text.strip())
