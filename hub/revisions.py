"""Parse the revision strings reconcilers report into a commit sha, a digest and a version.

The forms are in docs/api.md; anything else is kept as an opaque version of no known form:
ingest warns about it, and the gate and drift judge it `unknown_revision`, saying why.
"""

import re
from dataclasses import dataclass

_HEX40_64 = r"(?:[0-9a-f]{64}|[0-9a-f]{40})"
_GIT = re.compile(rf"^(?:(?P<ref>.+?)[@/])?(?:sha1:)?(?P<sha>{_HEX40_64})$", re.IGNORECASE)
_OCI = re.compile(r"^(?:(?P<tag>[^@]+)@)?sha256:(?P<digest>[0-9a-f]{64})$", re.IGNORECASE)
_VERSION = re.compile(r"^v?\d+(?:\.\d+)*(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")


@dataclass(frozen=True, slots=True)
class Revision:
    sha: str | None = None
    digest: str | None = None
    version: str | None = None
    # False for text of none of the forms above.
    known: bool = True


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
    return Revision(version=text, known=_VERSION.match(text) is not None)


UNKNOWN_FORM = (
    "matches no known revision form (<branch>@sha1:<sha>, <branch>/<sha>, a bare sha, "
    "<tag>@sha256:<digest> or a chart version)"
)
