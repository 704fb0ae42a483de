"""Repository URLs: one normalised form per repository, and URLs safe to show.

Reconcilers, configuration files and people spell one repository many ways
(`https://github.com/org/repo.git`, `git@github.com:org/repo`, `ssh://git@github.com/org/repo`).
The store keys repositories by the normalised form, so commit matching works whichever
spelling a cluster reports.
"""

import re
from functools import lru_cache
from urllib.parse import urlsplit

# scp-like syntax: [user@]host:path (no scheme, no slash before the colon).
_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>(?!//).+)$")
_DEFAULT_PORTS = {"https": 443, "http": 80}


class InvalidRepositoryUrl(ValueError):
    pass


def _strip_path(path: str) -> str:
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")]
    return path.rstrip("/")


def normalise_repository_url(url: str) -> str:
    """`https://host/path` for network URLs (https, http, ssh, git, scp-like), with a
    lower-case host, no user, no default port and no `.git`; `file:///path` for local ones."""
    text = url.strip()
    if not text:
        raise InvalidRepositoryUrl("a repository URL must not be empty")
    if "://" not in text:
        scp = _SCP.match(text)
        if scp and not text.startswith(("/", ".")):
            return f"https://{scp['host'].lower()}/{_strip_path(scp['path'])}"
        if text.startswith("/"):
            return "file:///" + _strip_path(text)
        raise InvalidRepositoryUrl(
            f"{text!r} is not a repository URL (expected https://, ssh://, git@host:path, "
            "file:// or an absolute path)"
        )
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme == "file":
        return "file:///" + _strip_path(parts.path)
    if scheme not in {"https", "http", "ssh", "git"} or not parts.hostname:
        raise InvalidRepositoryUrl(f"{redact_url(text)!r}: unsupported repository URL scheme")
    host = parts.hostname.lower()
    # An ssh port says nothing about the https address of the same repository.
    if parts.port is not None and scheme in _DEFAULT_PORTS and parts.port != _DEFAULT_PORTS[scheme]:
        host = f"{host}:{parts.port}"
    return f"https://{host}/{_strip_path(parts.path)}"


def redact_url(url: str) -> str:
    """The URL without any password embedded in it, for messages and logs."""
    parts = urlsplit(url) if "://" in url else None
    if parts is None or parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:***@" if parts.username else "***@"
    return parts._replace(netloc=user + netloc).geturl()


def has_password(url: str) -> bool:
    return "://" in url and urlsplit(url).password is not None


@lru_cache(maxsize=4096)
def spelled_repository(spelling: str) -> str | None:
    """The repository a URL as an agent reported it stands for, normalised; None when it is no
    repository URL. Cached: the fleet's agents report a few spellings over and over."""
    try:
        return normalise_repository_url(spelling)
    except InvalidRepositoryUrl:
        return None
