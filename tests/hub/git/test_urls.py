"""One normalised URL per repository, whichever way it is spelt."""

import re

import pytest

from hub.git.urls import (
    InvalidRepositoryUrl,
    check_clone_url,
    discovery_refusal,
    has_credentials,
    normalise_repository_url,
    redact_text,
    redact_url,
)


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/contoso/platform-gitops",
        "https://github.com/contoso/platform-gitops.git",
        "https://GitHub.com/contoso/platform-gitops/",
        "https://x-access-token@github.com:443/contoso/platform-gitops.git",
        "ssh://git@github.com/contoso/platform-gitops.git",
        "ssh://git@github.com:22/contoso/platform-gitops",
        "git@github.com:contoso/platform-gitops.git",
        "git://github.com/contoso/platform-gitops",
    ],
)
def test_spellings_of_one_repository_normalise_alike(url: str) -> None:
    assert normalise_repository_url(url) == "https://github.com/contoso/platform-gitops"


def test_other_ports_and_local_paths_stay_apart() -> None:
    assert (
        normalise_repository_url("https://git.internal:8443/a/b.git")
        == "https://git.internal:8443/a/b"
    )
    assert normalise_repository_url("/srv/git/platform.git") == "file:///srv/git/platform"
    assert normalise_repository_url("file:///srv/git/platform/") == "file:///srv/git/platform"


@pytest.mark.parametrize("url", ["", "platform-gitops", "ftp://example.com/a"])
def test_what_is_not_a_repository_url(url: str) -> None:
    with pytest.raises(InvalidRepositoryUrl):
        normalise_repository_url(url)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://ghp_t0ken@github.com/a/b.git", "https://github.com/a/b.git"),
        ("https://bot:hunter2@github.com/a/b", "https://github.com/a/b"),
        ("HTTP://bot:hunter2@git.internal:8080/a?b=c@d", "HTTP://git.internal:8080/a?b=c@d"),
        ("https://@github.com/a/b", "https://github.com/a/b"),
        ("https://github.com/a/b@v1", "https://github.com/a/b@v1"),
        ("ssh://git@github.com/a/b", "ssh://git@github.com/a/b"),
        ("ssh://git:hunter2@github.com/a/b", "ssh://git@github.com/a/b"),
        ("git@github.com:a/b.git", "git@github.com:a/b.git"),
        ("/srv/git/a", "/srv/git/a"),
    ],
)
def test_redacted_urls_keep_no_credentials(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert has_credentials(url) is (url != shown)


def test_redacted_text_hides_every_url_s_credentials() -> None:
    text = (
        "fatal: unable to access 'https://ghp_t0ken@github.com/a/b.git/' (from "
        "ssh://git:hunter2@host/c, mail ops@example.com)"
    )

    assert redact_text(text) == (
        "fatal: unable to access 'https://github.com/a/b.git/' (from ssh://git@host/c, mail "
        "ops@example.com)"
    )


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("https://github.com/contoso/platform-gitops.git", False),
        ("http://127.0.0.1:8080/platform.git", False),
        ("ssh://git@github.com:22/contoso/platform-gitops", False),
        ("git@github.com:contoso/platform-gitops.git", False),
        ("github.com:contoso/platform-gitops", False),
        ("https://[::1]:8443/a/b", False),
        ("file:///srv/git/platform", True),
        ("/srv/git/platform.git", True),
    ],
)
def test_git_is_given_these_forms(url: str, local: bool) -> None:
    assert check_clone_url(url) is local


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("--upload-pack=touch${IFS}/tmp/x;host:path", "cannot start with '-'"),
        ("-u/bin/sh", "cannot start with '-'"),
        ("ext::sh -c touch% /tmp/x", "no spaces or control characters"),
        ("ext::sh", "transport helpers are not allowed"),
        ("fd::3", "transport helpers are not allowed"),
        ("ssh://-oProxyCommand=x/repo", "'-oProxyCommand=x' is not a host name"),
        ("ssh://-oProxyCommand=x@host/repo", "'-oProxyCommand=x' is not a user name"),
        ("-oProxyCommand=x:repo", "cannot start with '-'"),
        ("git@-oProxyCommand=x:repo", "'-oProxyCommand=x' is not a host name"),
        ("host:-path", "a repository path cannot start with '-'"),
        ("git://github.com/contoso/platform", "unsupported repository URL scheme"),
        ("https://github.com", "names no repository path"),
        ("https://github.com:99999/a/b", "the port is not a number"),
        ("file://remote.example/srv/git", "a file URL names an absolute local path"),
        ("relative/path", "is not a repository URL"),
        ("https://github.com/a/b\n", "no spaces or control characters"),
    ],
)
def test_git_is_never_given_these(url: str, problem: str) -> None:
    with pytest.raises(InvalidRepositoryUrl, match=re.escape(problem)):
        check_clone_url(url)


@pytest.mark.parametrize(
    ("allowed", "url", "refused"),
    [
        (["github.com"], "git@GitHub.com:contoso/app.git", False),
        (["github.com"], "https://gitlab.com/contoso/app", True),
        (["git.internal:8443"], "https://git.internal:8443/a/b", False),
        (["git.internal:8443"], "https://git.internal/a/b", True),
        (["https://github.com/contoso"], "ssh://git@github.com/contoso/app", False),
        (["https://github.com/contoso"], "https://github.com/contoso-evil/app", True),
        (["https://github.com/contoso"], "http://169.254.169.254/latest/meta-data", True),
    ],
)
def test_discovery_allowed_urls_by_host_or_prefix(
    allowed: list[str], url: str, refused: bool
) -> None:
    assert (discovery_refusal(url, "https://github.com/contoso/platform", allowed) is None) is (
        not refused
    )
