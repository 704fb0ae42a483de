"""How a delivery reaches a receiver: the URL rules (https, a public address), the signature,
and the request itself, sent to the address that was checked.

The address is checked as resolved at each delivery and the connection made to that very
address (the Host header and TLS server name kept as the URL's), so a name that resolves
elsewhere between the check and the connection (DNS rebinding) cannot reach the hub's
neighbours. FLEETMARK_WEBHOOK_ALLOW_PRIVATE lifts both rules."""

import asyncio
import hashlib
import hmac
import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import httpx

__all__ = [
    "Answer",
    "RefusedDestination",
    "check_url",
    "post",
    "refused_address",
    "signature",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Kept of a receiver's answer to a failed delivery, for `deliveries`.
_ERROR_CHARS = 500
_CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
_UNIQUE_LOCAL = ipaddress.IPv6Network("fc00::/7")
# Where IPv6 addresses are handed out from; site-local (fec0::/10) and the rest are not public.
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
# IPv6 addresses whose last 32 bits are an IPv4 address the packets reach: NAT64's well-known
# prefix, IPv4-translated and IPv4-compatible addresses.
_CARRYING_IPV4 = tuple(
    ipaddress.IPv6Network(network) for network in ("64:ff9b::/96", "::ffff:0:0:0/96", "::/96")
)


class RefusedDestination(ValueError):
    """A URL or an address events may not be sent to."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What came of one attempt: the receiver's status, or why there was none."""

    status_code: int | None
    error: str | None

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def _carried(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, NAT64, translated, compatible, 6to4,
    or a Teredo client), which its packets reach."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if any(address in network for network in _CARRYING_IPV4):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def refused_address(address: IPAddress) -> str | None:
    """Why events may not go to `address` (a loopback, link-local, private, … address), or
    None for a public one. An IPv6 address that carries an IPv4 address is judged as that."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.is_loopback:
            return "loopback"
        carried = _carried(address)
        if carried is not None:
            address = carried
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if isinstance(address, ipaddress.IPv6Address) and address in _UNIQUE_LOCAL:
        return "unique-local"
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return "shared (CGNAT)"
    if address.is_private:
        return "private"
    if address.is_multicast or address.is_unspecified or not address.is_global:
        return "non-public"
    if isinstance(address, ipaddress.IPv6Address) and address not in _GLOBAL_UNICAST:
        return "non-public"
    return None


def check_url(url: str, *, allow_private: bool) -> httpx.URL:
    """`url` as a receiver's address: https, with a host, and no literal address that is not
    public; RefusedDestination says what is wrong. A name is checked when it is resolved."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise RefusedDestination(f"{url!r} is not a URL: {exc}") from None
    if parsed.scheme not in ("https", "http") or not parsed.host:
        raise RefusedDestination(f"{url!r} is not an http(s) URL with a host")
    if allow_private:
        return parsed
    if parsed.scheme != "https":
        raise RefusedDestination(
            f"{url!r} is not https; plain http is sent only with FLEETMARK_WEBHOOK_ALLOW_PRIVATE"
        )
    try:
        literal = ipaddress.ip_address(parsed.host)
    except ValueError:
        return parsed
    _check(parsed.host, literal)
    return parsed


def _check(host: str, address: IPAddress) -> None:
    reason = refused_address(address)
    if reason is None:
        return
    where = host if host == str(address) else f"{host} resolves to {address}, which"
    raise RefusedDestination(
        f"{where} is a {reason} address; events go to public addresses only, unless "
        "FLEETMARK_WEBHOOK_ALLOW_PRIVATE=true"
    )


async def _addresses(url: httpx.URL, *, allow_private: bool) -> list[IPAddress]:
    """The addresses the URL's host resolves to now, every one of them checked."""
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        found = await asyncio.get_running_loop().getaddrinfo(
            _ascii_host(url), port, type=socket.SOCK_STREAM
        )
    except (OSError, UnicodeError) as exc:
        raise RefusedDestination(f"{url.host} does not resolve: {exc}") from None
    addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in found))
    if not allow_private:
        for address in addresses:
            _check(url.host, address)
    return addresses


def _ascii_host(url: httpx.URL) -> str:
    """The URL's host as DNS and TLS name it (an international name in its xn-- form)."""
    return url.raw_host.decode("ascii")


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """X-Fleetmark-Signature: `t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<body>">`."""
    signed = f"{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


async def post(
    http: httpx.AsyncClient,
    url: str,
    body: bytes,
    *,
    headers: Mapping[str, str],
    secret: str,
    now: datetime,
    allow_private: bool,
) -> Answer:
    """POST `body` to `url`, signed, to the first of its checked addresses that connects."""
    try:
        target = check_url(url, allow_private=allow_private)
        addresses = await _addresses(target, allow_private=allow_private)
    except RefusedDestination as exc:
        return Answer(None, str(exc))
    sent = {
        **headers,
        "Host": target.netloc.decode("ascii"),
        "X-Fleetmark-Signature": signature(secret, int(now.timestamp()), body),
    }
    extensions = {"sni_hostname": _ascii_host(target)} if target.scheme == "https" else {}
    error = f"{target.host} resolves to no address"
    for address in addresses:
        try:
            response = await http.post(
                target.copy_with(host=str(address)),
                content=body,
                headers=sent,
                extensions=extensions,
            )
        except httpx.ConnectError as exc:
            error = f"cannot connect to {address}: {exc}"
            continue
        except httpx.HTTPError as exc:
            return Answer(None, f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS])
        if 200 <= response.status_code < 300:
            return Answer(response.status_code, None)
        return Answer(response.status_code, response.text[:_ERROR_CHARS] or None)
    return Answer(None, error[:_ERROR_CHARS])
