"""Revision strings as reconcilers write them, taken apart into ref, commit, digest and version.

The mappers in `agent.sources` pass revisions to the hub unchanged; they parse them only to
compare two revisions that may be written in different forms (Argo CD's compared and applied
revisions, a Flux `main@sha1:<sha>` against a bare sha). The hub has its own parser.

Forms:

| revision                               | ref               | sha  | digest        | version |
|----------------------------------------|-------------------|------|---------------|---------|
| `main@sha1:<40hex>`                    | `main`            | hex  |               |         |
| `refs/heads/main@sha1:<40hex>`         | `refs/heads/main` | hex  |               |         |
| `main/<40hex>` (Flux before RFC-0005)  | `main`            | hex  |               |         |
| `sha1:<40hex>`                         |                   | hex  |               |         |
| `<40hex>` or `<64hex>` (bare sha)      |                   | hex  |               |         |
| `v1.2.3@sha256:<64hex>` (OCI, Helm)    |                   |      | `sha256:<hex>`| `v1.2.3`|
| `sha256:<64hex>`                       |                   |      | `sha256:<hex>`|         |
| `6.5.4`, `1.2.3+1234567890ab`, other   |                   |      |               | as is   |

`@sha256:` always means an OCI digest (Flux writes Git commits as `@sha1:`), while a 64-hex
sha after `/` or on its own is a commit of a SHA-256 Git repository. Hex is lower-cased.
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
