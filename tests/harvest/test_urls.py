"""One normalised URL per repository, whichever way it is spelt."""

import pytest

from hub.harvest.urls import InvalidRepositoryUrl, normalise_repository_url, redact_url


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


def test_redacted_urls_hide_passwords_only() -> None:
    assert redact_url("https://bot:hunter2@github.com/a/b") == "https://bot:***@github.com/a/b"
    assert redact_url("https://github.com/a/b") == "https://github.com/a/b"
