"""Where events may go: https, and public addresses only (unless private ones are allowed)."""

import ipaddress

import pytest

from hub.events.webhooks import RefusedDestination, check_url, refused_address, shown_url

REFUSED = {
    "127.0.0.1": "loopback",
    "::1": "loopback",
    "::ffff:127.0.0.1": "loopback",
    "169.254.169.254": "link-local",
    "fe80::1": "link-local",
    "10.0.0.1": "private",
    "172.16.5.4": "private",
    "192.168.1.1": "private",
    "100.64.0.1": "shared (CGNAT)",
    "fd00::1": "unique-local",
    "0.0.0.0": "private",
    # IPv6 addresses that carry an IPv4 address: NAT64, 6to4, IPv4-compatible, IPv4-translated
    # and a Teredo client's; and site-local.
    "64:ff9b::a9fe:a9fe": "link-local",
    "2002:a9fe:a9fe::1": "link-local",
    "::7f00:1": "loopback",
    "::ffff:0:7f00:1": "loopback",
    "2001:0:4136:e378:8000:63bf:f5ff:fffe": "private",
    "fec0::1": "non-public",
}


@pytest.mark.parametrize(("address", "reason"), REFUSED.items())
def test_addresses_that_are_not_public_are_refused(address: str, reason: str) -> None:
    assert refused_address(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize(
    "address", ["93.184.215.14", "2606:4700::1111", "64:ff9b::808:808", "2002:808:808::1"]
)
def test_public_addresses_pass(address: str) -> None:
    assert refused_address(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://hooks.example.com/x", "is not https"),
        ("https://127.0.0.1/x", "127.0.0.1 is a loopback address"),
        ("https://169.254.169.254/latest/meta-data", "is a link-local address"),
        ("https://10.1.2.3/", "is a private address"),
        ("https://[fd12::1]/", "is a unique-local address"),
        ("ftp://hooks.example.com/", "is not an http(s) URL"),
        ("https:///path", "is not an http(s) URL with a host"),
    ],
)
def test_urls_refused_when_a_subscription_is_made(url: str, words: str) -> None:
    with pytest.raises(RefusedDestination, match=words.replace("(", r"\(").replace(")", r"\)")):
        check_url(url, allow_private=False)


def test_allowing_private_receivers_lifts_both_rules() -> None:
    assert check_url("http://127.0.0.1:9000/x", allow_private=True).host == "127.0.0.1"
    assert check_url("https://hooks.example.com/x", allow_private=False).host == (
        "hooks.example.com"
    )


@pytest.mark.parametrize(
    "url", ["https://127.1/x", "https://2130706433/", "https://0x7f.0.0.1/", "https://0177.1/"]
)
def test_short_and_numeric_ipv4_spellings_are_read_as_the_resolver_reads_them(url: str) -> None:
    with pytest.raises(RefusedDestination, match="is a loopback address"):
        check_url(url, allow_private=False)


@pytest.mark.parametrize(
    ("url", "secret_path", "shown"),
    [
        (
            "https://hooks.slack.com/services/T0123/B0123/ZyXwVuTsRqPoNmLk",
            True,
            "https://hooks.slack.com/***",
        ),
        ("https://chat.example.com:8443/hooks/abc", True, "https://chat.example.com:8443/***"),
        ("https://hooks.example.com/", True, "https://hooks.example.com/"),
        (
            "https://user:pw@hooks.example.com/in/a1b2c3d4e5f6a7b8c9d0/events?key=1",
            False,
            "https://hooks.example.com/in/***/events?***",
        ),
        (
            "https://hooks.example.com/fleetmark/events",
            False,
            "https://hooks.example.com/fleetmark/events",
        ),
    ],
)
def test_a_subscriptions_url_is_shown_without_its_secrets(
    url: str, secret_path: bool, shown: str
) -> None:
    assert shown_url(url, secret_path=secret_path) == shown
