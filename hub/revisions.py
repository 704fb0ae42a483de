"""Parse the revision strings reconcilers report into a commit sha, a digest and a version.

Forms: `main@sha1:<40hex>`, `refs/heads/main@sha1:<40hex>`, `main/<40hex>`, `sha1:<40hex>`,
a bare sha (40 or 64 hex), OCI `v1.2.3@sha256:<64hex>`, `sha256:<64hex>`, Helm chart
versions (`1.2.3`, `1.2.3+build.1`), and anything else kept as an opaque version.
"""

import re
from dataclasses import dataclass

_HEX40_64 = r"(?:[0-9a-f]{64}|[0-9a-f]{40})"
_GIT = re.compile(rf"^(?:(?P<ref>.+?)[@/])?(?:sha1:)?(?P<sha>{_HEX40_64})$", re.IGNORECASE)
_OCI = re.compile(r"^(?:(?P<tag>[^@]+)@)?sha256:(?P<digest>[0-9a-f]{64})$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Revision:
    sha: str | None = None
    digest: str | None = None
    version: str | None = None


def parse_revision(revision: str | None) -> Revision:
    if not revision:
        return Revision()
    text = revision.strip()
    oci = _OCI.match(text)
    if oci:
        return Revision(digest="sha256:" + oci["digest"].lower(), version=oci["tag"])
    git = _GIT.match(text)
    if git:
        return Revision(sha=git["sha"].lower())
    return Revision(version=text)
