"""Revision strings as reconcilers write them, taken apart into ref, commit, digest and version.

The mappers in `agent.sources` parse them only to compare two revisions written in different
forms; the hub has its own parser. The forms are listed in docs/contributing.md ("Inside the
agent").
"""

import re
from dataclasses import dataclass

__all__ = ["Revision", "parse_revision", "same_revision"]

_SHA = r"[0-9a-f]{40}(?:[0-9a-f]{24})?"
_FLUX_GIT = re.compile(r"^(?P<ref>.+)@sha1:(?P<sha>[0-9a-f]{40})$", re.IGNORECASE)
_LEGACY_GIT = re.compile(rf"^(?P<ref>.+)/(?P<sha>{_SHA})$", re.IGNORECASE)
_OCI = re.compile(r"^(?:(?P<tag>.+)@)?sha256:(?P<hex>[0-9a-f]{64})$", re.IGNORECASE)
_SHA1_PREFIXED = re.compile(r"^sha1:(?P<sha>[0-9a-f]{40})$", re.IGNORECASE)
_BARE_SHA = re.compile(rf"^(?P<sha>{_SHA})$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Revision:
    ref: str | None = None
    sha: str | None = None
    digest: str | None = None
    version: str | None = None


def parse_revision(revision: str | None) -> Revision:
    text = (revision or "").strip()
    if not text:
        return Revision()
    if match := _FLUX_GIT.match(text):
        return Revision(ref=match["ref"], sha=match["sha"].lower())
    if match := _OCI.match(text):
        return Revision(digest="sha256:" + match["hex"].lower(), version=match["tag"])
    if match := _SHA1_PREFIXED.match(text) or _BARE_SHA.match(text):
        return Revision(sha=match["sha"].lower())
    if match := _LEGACY_GIT.match(text):
        return Revision(ref=match["ref"], sha=match["sha"].lower())
    return Revision(version=text)


def same_revision(left: str | None, right: str | None) -> bool:
    """Whether two revision strings name the same content, whatever form each is written in.

    Commits compare by sha and artifacts by digest, so `main@sha1:<sha>` equals `<sha>`;
    anything else compares as text. Two unknown revisions are never the same.
    """
    a, b = parse_revision(left), parse_revision(right)
    if a.sha or b.sha:
        return a.sha == b.sha
    if a.digest or b.digest:
        return a.digest == b.digest
    return a.version is not None and a.version == b.version
