"""Repository URLs: one normalised form per repository (the store's key, whatever spelling a
cluster reports), the URLs git may fetch from, and URLs safe to show. URLs come from outside,
so `check_clone_url` admits only an explicit grammar (never an option, `ext::` or an ssh
option), and `discovery_refusal` keeps repository content from pointing the hub at its own
files or at hosts the operator did not allow.
"""

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator

# scp-like syntax: [user@]host:path (no scheme, no slash before the colon).
_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>(?!//).+)$")
_DEFAULT_PORTS = {"https": 443, "http": 80}
# What git may fetch from: network URLs, and local repositories where they are allowed.
_NETWORK_SCHEMES = ("https", "http", "ssh")
# A DNS name, an IPv4 address, or a bracketed IPv6 address; never starting with `-`.
_HOST = re.compile(
    r"^(?:[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?)(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?)*$"
    r"|^\[[0-9A-Fa-f:.]+\]$"
)
_USER = re.compile(r"^[A-Za-z0-9_.~+%][A-Za-z0-9_.~+%-]*$")
# git's `<transport>::<address>` form, which runs a remote helper (`ext::` runs a command).
_TRANSPORT_HELPER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+.-]*::")
_UNPRINTABLE = re.compile(r"[\s\x00-\x1f\x7f]")
_GRAMMAR = "expected https://, http://, ssh://, user@host:path, file:///path or an absolute path"


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


def check_clone_url(url: str) -> bool:
    """Whether `url`, which git is to fetch from, is local (`file:///path` or an absolute
    path); InvalidRepositoryUrl naming the problem when it is none of the forms git is given:
    https, http and ssh URLs, scp-like `[user@]host:path`, and local repositories."""
    if not url:
        raise InvalidRepositoryUrl("a repository URL must not be empty")
    shown = redact_url(url)
    if _UNPRINTABLE.search(url):
        raise InvalidRepositoryUrl(
            f"{shown!r}: a repository URL has no spaces or control characters"
        )
    if url.startswith("-"):
        raise InvalidRepositoryUrl(f"{shown!r}: a repository URL cannot start with '-'")
    if _TRANSPORT_HELPER.match(url):
        raise InvalidRepositoryUrl(f"{shown!r}: git transport helpers are not allowed; {_GRAMMAR}")
    if "://" in url:
        return _check_scheme_url(url, shown)
    if url.startswith("/"):
        return True
    scp = _SCP.match(url)
    if scp is None:
        raise InvalidRepositoryUrl(f"{shown!r} is not a repository URL; {_GRAMMAR}")
    user = url.split("@", 1)[0] if "@" in url.split(":", 1)[0] else None
    _check_host(scp["host"], user, shown)
    if scp["path"].startswith("-"):
        raise InvalidRepositoryUrl(f"{shown!r}: a repository path cannot start with '-'")
    return False


def _check_scheme_url(url: str, shown: str) -> bool:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise InvalidRepositoryUrl(f"{shown!r}: a file URL names an absolute local path")
        return True
    if scheme not in _NETWORK_SCHEMES:
        raise InvalidRepositoryUrl(f"{shown!r}: unsupported repository URL scheme; {_GRAMMAR}")
    host = parts.netloc.rsplit("@", 1)[-1]
    host = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    _check_host(host, parts.username, shown)
    try:
        parts.port  # noqa: B018 - urlsplit checks the port when asked for it
    except ValueError:
        raise InvalidRepositoryUrl(f"{shown!r}: the port is not a number from 1 to 65535") from None
    if parts.path.strip("/") == "":
        raise InvalidRepositoryUrl(f"{shown!r}: the URL names no repository path")
    return False


# GitHub's spelling of an owner (a user or an organisation) and of a repository name.
_GITHUB_OWNER = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
_GITHUB_NAME = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


def github_repository(url: str, api_host: str) -> tuple[str, str]:
    """The owner and name of the repository at `url` on the GitHub whose REST API is on
    `api_host`: api.github.com serves github.com, api.<name>.ghe.com serves <name>.ghe.com, and
    a GitHub Enterprise Server serves its API on its own host (/api/v3)."""
    normalised = normalise_repository_url(url)
    parts = urlsplit(normalised)
    host = parts.hostname or ""
    expected = api_host.removeprefix("api.")
    if normalised.startswith("file:") or host not in (api_host, expected):
        raise InvalidRepositoryUrl(
            f"{redact_url(url)!r} is not a repository on {expected}, the GitHub host of the "
            f"API at {api_host} (expected https://{expected}/OWNER/REPOSITORY)"
        )
    path = parts.path.strip("/").split("/")
    if len(path) != 2 or not _GITHUB_OWNER.match(path[0]) or not _GITHUB_NAME.match(path[1]):
        raise InvalidRepositoryUrl(
            f"{redact_url(url)!r} does not name a GitHub repository as OWNER/REPOSITORY"
        )
    return path[0], path[1]


# A GitLab namespace or project path segment.
_GITLAB_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$")


def gitlab_project(url: str, api_host: str) -> str:
    """The path (group/subgroup/project) of the project at `url` on the GitLab whose REST API is
    on `api_host`: GitLab serves its API on its own host (/api/v4)."""
    normalised = normalise_repository_url(url)
    parts = urlsplit(normalised)
    if normalised.startswith("file:") or parts.hostname != api_host:
        raise InvalidRepositoryUrl(
            f"{redact_url(url)!r} is not a project on {api_host}, the GitLab host of the API "
            f"(expected https://{api_host}/GROUP/PROJECT)"
        )
    path = parts.path.strip("/").split("/")
    if len(path) < 2 or not all(_GITLAB_SEGMENT.match(segment) for segment in path):
        raise InvalidRepositoryUrl(
            f"{redact_url(url)!r} does not name a GitLab project as GROUP/PROJECT"
        )
    return "/".join(path)


def _check_host(host: str, user: str | None, shown: str) -> None:
    if not _HOST.match(host):
        raise InvalidRepositoryUrl(f"{shown!r}: {host!r} is not a host name")
    if user is not None and not _USER.match(user):
        raise InvalidRepositoryUrl(f"{shown!r}: {user!r} is not a user name")


LOCAL_REFUSED = (
    "{url} is on the hub's own file system: local repositories are refused when FLEETMARK_MODE "
    "is not 'development' unless FLEETMARK_ALLOW_LOCAL_REPOSITORIES=true"
)


def is_local_url(url: str) -> bool:
    """Whether a URL that passed `check_clone_url` names a repository on this machine."""
    return url.startswith("/") or url.lower().startswith("file:")


def discovery_refusal(url: str, found_in: str | None, allowed: Sequence[str] | None) -> str | None:
    """Why the hub will not fetch `url`, which repository content of `found_in` (the clone URL
    of the repository it was read from; None: not known) names; None when it may.

    A local repository is fetched only when it was found in a local repository, so that a
    repository fetched from a remote can never make the hub read its own files. `allowed`
    (hosts, or URL prefixes) limits where content may point the hub at all."""
    try:
        local = check_clone_url(url)
    except InvalidRepositoryUrl as exc:
        return str(exc)
    shown = redact_url(url)
    named_by = "a repository no longer known" if found_in is None else redact_url(found_in)
    if local and (found_in is None or not is_local_url(found_in)):
        origin = named_by if found_in is None else f"{named_by}, which is not local"
        return (
            f"{shown} is a local path, named by {origin}: only a local repository may point "
            "the hub at its own files"
        )
    if allowed is not None and not any(_allows(entry, url) for entry in allowed):
        return f"{shown}, named by {named_by}, is not in FLEETMARK_DISCOVERY_ALLOWED_URLS"
    return None


def _allows(entry: str, url: str) -> bool:
    """A host (`github.com`, `git.internal:8443`) allows every repository on it; a URL prefix
    (`https://github.com/contoso`) the repositories below it, whichever way either is spelt."""
    normalised = normalise_repository_url(url)
    if "/" not in entry:
        return urlsplit(normalised).netloc == entry.lower()
    try:
        prefix = normalise_repository_url(entry)
    except InvalidRepositoryUrl:
        return False
    return normalised == prefix or normalised.startswith(prefix.rstrip("/") + "/")


# A token goes in the user name of an http(s) URL (`https://ghp_…@github.com/…`), so there any
# userinfo is a secret; other schemes keep their user (`ssh://git@host/…` names none), never a
# password.
_SECRET_USER_SCHEMES = frozenset({"http", "https"})
# A URL's scheme and authority in prose; the look-behind starts a scheme only where a word does,
# so a long run of letters costs one pass.
_URL_AUTHORITY = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*)://([^\s/?#]*)")
CREDENTIALS_REFUSED = (
    "the URL holds credentials (a user name or password); reference the secret in "
    "`credentials` (token_file or token_env) instead"
)


def _shown_authority(scheme: str, authority: str) -> str:
    if "@" not in authority:
        return authority
    userinfo, _, host = authority.rpartition("@")
    if scheme.lower() in _SECRET_USER_SCHEMES:
        return host
    return f"{userinfo.split(':', 1)[0]}@{host}"


@lru_cache(maxsize=4096)
def redact_url(url: str) -> str:
    """`url` without its credentials, to store, show and log: no userinfo on http(s), no
    password on other schemes. Cached: agents report a few URLs over and over."""
    scheme, separator, rest = url.partition("://")
    if not separator or "@" not in rest:
        return url
    end = next((index for index, char in enumerate(rest) if char in "/?#"), len(rest))
    return f"{scheme}://{_shown_authority(scheme, rest[:end])}{rest[end:]}"


def redact_text(text: str) -> str:
    """`text` (a message, an error) with every URL in it redacted as by `redact_url`."""
    if "@" not in text or "://" not in text:
        return text
    return _URL_AUTHORITY.sub(
        lambda found: f"{found[1]}://{_shown_authority(found[1], found[2])}", text
    )


def has_credentials(url: str) -> bool:
    return redact_url(url) != url


# As the hub answers with them (response schemas): without credentials.
RedactedUrl = Annotated[str, AfterValidator(redact_url)]
RedactedText = Annotated[str, AfterValidator(redact_text)]


@lru_cache(maxsize=4096)
def spelled_repository(spelling: str) -> str | None:
    """The repository a URL as an agent reported it stands for, normalised; None when it is no
    repository URL. Cached: the fleet's agents report a few spellings over and over."""
    try:
        return normalise_repository_url(spelling)
    except InvalidRepositoryUrl:
        return None
