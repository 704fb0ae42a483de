"""How a delivery reaches a receiver: the URL rules (https, a public address), the signature,
and the request itself, sent to the address that was checked.

The address is checked as resolved at each delivery and the connection made to that very
address (the Host header and TLS server name kept as the URL's), so a name that resolves
elsewhere between the check and the connection (DNS rebinding) cannot reach the hub's
neighbours. FLEETMARK_WEBHOOK_ALLOW_PRIVATE lifts both rules.

Connections are kept alive per receiver (scheme, host and port), never shared between hosts:
a connection made to an address for one name, with that name's TLS certificate, would
otherwise carry another name's requests to the same address."""

import asyncio
import hashlib
import hmac
import ipaddress
import re
import socket
from collections.abc import Mapping
from contextlib import AsyncExitStack
from datetime import datetime
from types import TracebackType

import httpx

from hub.outbound import ERROR_CHARS, Answer, failure, retry_after

__all__ = [
    "Receivers",
    "RefusedDestination",
    "check_url",
    "post",
    "refused_address",
    "shown_url",
    "signature",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# The answers whose Retry-After sets the next attempt: too many requests, unavailable.
_RETRY_AFTER_STATUSES = frozenset({429, 503})
# A path segment shown masked: a long run of letters and digits, both, as tokens are.
_TOKEN = re.compile(r"^(?=[^/]*[0-9])(?=[^/]*[A-Za-z])[A-Za-z0-9_-]{16,}$")
_MASK = "***"
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
    literal = _literal_address(parsed.host)
    if literal is not None:
        _check(parsed.host, literal)
    return parsed


def _literal_address(host: str) -> IPAddress | None:
    """The address `host` is, as the resolver reads it: besides the usual spellings, the short
    and numeric IPv4 forms inet_aton takes (`127.1`, `2130706433`, `0x7f.1`); None for a
    name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


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


def shown_url(url: str, *, secret_path: bool) -> str:
    """`url` as answered and logged: no user or password, no query, and its path masked, all
    of it when `secret_path` (an incoming webhook's path is its credential, as Slack's
    `/services/T…/B…/<secret>`), else each segment that looks like a token."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return "(not a URL)"
    path = parsed.raw_path.partition(b"?")[0].decode("ascii")
    if secret_path and path not in ("", "/"):
        path = "/***"
    else:
        path = "/".join(_MASK if _TOKEN.match(part) else part for part in path.split("/"))
    query = "?***" if parsed.query else ""
    return f"{parsed.scheme}://{parsed.netloc.decode('ascii')}{path}{query}"


class Receivers:
    """The HTTP clients of a round of deliveries, one per receiver's scheme, host and port, so
    that no connection made for one host carries another's requests."""

    def __init__(self, *, timeout: float) -> None:
        self.timeout = httpx.Timeout(timeout)
        self._clients: dict[tuple[str, str, int | None], httpx.AsyncClient] = {}
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> "Receivers":
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._stack.aclose()

    def client(self, url: httpx.URL) -> httpx.AsyncClient:
        key = (url.scheme, url.host, url.port)
        found = self._clients.get(key)
        if found is None:
            found = httpx.AsyncClient(timeout=self.timeout, follow_redirects=False)
            self._stack.push_async_callback(found.aclose)
            self._clients[key] = found
        return found


def _masked(text: str, url: httpx.URL) -> str:
    """`text` (an error, a receiver's answer) as kept: without the URL's path, which may be a
    secret."""
    path = url.raw_path.partition(b"?")[0].decode("ascii")
    if path not in ("", "/"):
        text = text.replace(path, f"/{_MASK}")
    return text[:ERROR_CHARS]


async def post(
    receivers: Receivers,
    url: str,
    body: bytes,
    *,
    headers: Mapping[str, str],
    secret: str,
    now: datetime,
    allow_private: bool,
) -> Answer:
    """POST `body` to `url`, signed, to the first of its checked addresses that connects. A
    429 or 503 with Retry-After answers the time it names."""
    try:
        target = check_url(url, allow_private=allow_private)
        addresses = await _addresses(target, allow_private=allow_private)
    except RefusedDestination as exc:
        return Answer(None, str(exc))
    http = receivers.client(target)
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
            return Answer(None, _masked(failure(exc), target))
        code = response.status_code
        if 200 <= code < 300:
            return Answer(code, None)
        retry_at = retry_after(response, now) if code in _RETRY_AFTER_STATUSES else None
        return Answer(code, _masked(response.text, target) or None, retry_at)
    return Answer(None, _masked(error, target))
