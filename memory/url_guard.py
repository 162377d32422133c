"""Refuse user-supplied LLM URLs that point inside the server's network.

A visitor who may choose the base URL could otherwise make the server send
requests to its own loopback, the private network or a cloud metadata address.
Addresses are judged by an allow-list of global unicast space (IPv4, and IPv6 2000::/3, minus
the special-purpose blocks inside them); an IPv6 address that carries an IPv4 address (mapped,
compatible, translated, NAT64, 6to4, Teredo) is also judged by the IPv4 address inside.
Two checks, both on the addresses the host name resolves to:

* `check_url(url)` when the URL is saved, so a bad one is refused with a message
  before anything is sent;
* `GuardedTransport`, the httpx transport of the OpenAI client of a user-chosen
  URL: every request (redirects included) is resolved and checked again, and the
  connection goes to the very address that was checked (the host name is kept
  for the Host header and TLS), so a DNS answer that changes between check and
  connect (rebinding) cannot reach a refused address.

The deployer's own configured URL never goes through this guard (it may well be
a local Ollama). Lives in memory/ because the OpenAI client is built here.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

try:
    import httpx2 as http  # the HTTP library openai >= 3 builds its client on
except ImportError:  # older openai: httpx
    import httpx as http  # type: ignore[no-redef]

Resolver = Callable[[str, int], list[str]]

_Net = ipaddress.IPv4Network | ipaddress.IPv6Network


def _nets(*pairs: tuple[str, str]) -> list[tuple[_Net, str]]:
    return [(ipaddress.ip_network(n), why) for n, why in pairs]


# The allow-list: only global unicast space is called, minus the special-purpose blocks inside it
# (IANA's IPv4 and IPv6 Special-Purpose Address Registries). Anything else is refused, named by
# the first block below that holds it, else "reserved". Python's `is_global` is not enough: it
# calls ::127.0.0.1, ::ffff:0:127.0.0.1, 64:ff9b:1::/48 and site-local fec0::/10 global.
_V6_ALLOWED = ipaddress.ip_network("2000::/3")  # global unicast
_V4_REFUSED = _nets(
    ("0.0.0.0/32", "unspecified"),
    ("0.0.0.0/8", "reserved ('this network')"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local (where cloud metadata lives)"),
    ("10.0.0.0/8", "private-network"),
    ("172.16.0.0/12", "private-network"),
    ("192.168.0.0/16", "private-network"),
    ("100.64.0.0/10", "reserved (carrier-grade NAT shared)"),
    ("192.0.0.0/24", "reserved (IETF protocol assignments)"),
    ("192.0.2.0/24", "documentation-only"),
    ("198.51.100.0/24", "documentation-only"),
    ("203.0.113.0/24", "documentation-only"),
    ("192.88.99.0/24", "reserved (6to4 relay anycast)"),
    ("198.18.0.0/15", "private-network (benchmarking)"),
    ("224.0.0.0/4", "multicast"),
    ("255.255.255.255/32", "broadcast"),
    ("240.0.0.0/4", "private-network (reserved 240/4)"),
)
_V6_REFUSED = _nets(
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("fe80::/10", "link-local (where cloud metadata lives)"),
    ("fec0::/10", "site-local (deprecated private-network)"),
    ("fc00::/7", "private-network (unique local)"),
    ("ff00::/8", "multicast"),
    ("64:ff9b:1::/48", "NAT64 local-use (private-network translation)"),
    ("100::/64", "reserved (discard-only)"),
    ("2001:db8::/32", "documentation-only"),
    ("3fff::/20", "documentation-only"),
    ("2001::/23", "reserved (IETF protocol assignments)"),
)
# IPv6 forms that carry an IPv4 address: the IPv4 address is judged too. `None`: the form itself is
# refused even when the IPv4 inside is public (deprecated, or only meaningful inside a translator).
_V4_INSIDE = _nets(
    ("::ffff:0:0/96", ""),  # IPv4-mapped: the socket connects to the IPv4 address
    ("64:ff9b::/96", ""),  # NAT64 well-known prefix
    ("::/96", "IPv4-compatible (deprecated)"),
    ("::ffff:0:0:0/96", "IPv4-translated (SIIT)"),
)


class UnsafeURL(ValueError):
    """The URL's host is, or resolves to, an address this server must not call for a user."""


def system_resolver(host: str, port: int) -> list[str]:
    """Every address of `host` (A and AAAA), as the connection would see them."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise UnsafeURL(f"the host {host!r} cannot be resolved ({e})") from None
    return list(dict.fromkeys(str(info[4][0]).split("%")[0] for info in infos))


def address_refusal(address: str) -> str | None:
    """Why this IP address is refused (None: it is global unicast, and so is any IPv4 inside it)."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv4Address):
        return _first(ip, _V4_REFUSED)  # the table covers all of IPv4 that is not global unicast
    ip = ipaddress.IPv6Address(int(ip))  # without a zone id (%eth0)
    own = _first(ip, _V6_REFUSED[:2])  # :: and ::1 before ::/96 reads them as 0.0.0.0 and 0.0.0.1
    if own:
        return own
    for net, form in _V4_INSIDE:
        if ip in net:
            return _inside(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), form or None)
    if ip.teredo:  # 2001::/32: the Teredo server and the (obfuscated) client IPv4 addresses
        server, client = ip.teredo
        return _inside(server, None) or _inside(client, None)
    if ip.sixtofour is not None:  # 2002::/16
        return _inside(ip.sixtofour, None)
    return _first(ip, _V6_REFUSED) or (None if ip in _V6_ALLOWED else "reserved, not global unicast")


def _first(ip, table: list[tuple[_Net, str]]) -> str | None:
    return next((why for net, why in table if ip in net), None)


def _inside(inner: ipaddress.IPv4Address, form: str | None) -> str | None:
    """The verdict on an IPv6 address that carries `inner`: the inner's refusal, else the form's."""
    why = address_refusal(str(inner))
    if why:
        return f"{why}: the IPv4 address {inner} inside an IPv6 address"
    return f"{form} IPv6" if form else None


def _host_port(url: str) -> tuple[str, int]:
    u = urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise UnsafeURL("the base URL must start with http:// or https:// and name a host")
    try:
        port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError:
        raise UnsafeURL("the base URL has an invalid port") from None
    return u.hostname, port


def checked_addresses(host: str, port: int, resolver: Resolver = system_resolver) -> list[str]:
    """The addresses of `host`, all of them public, or UnsafeURL saying which one is not."""
    host = host.strip("[]")
    try:
        addresses, literal = [str(ipaddress.ip_address(host))], True
    except ValueError:
        addresses, literal = resolver(host, port), False
    if not addresses:
        raise UnsafeURL(f"the host {host!r} has no address")
    for a in addresses:
        why = address_refusal(a)
        if why:
            shown = host if literal else f"{host} (resolves to {a})"
            raise UnsafeURL(
                f"{shown} is not a public address ({why}); this server only calls public (global "
                "unicast) addresses for a URL chosen in the settings"
            )
    return addresses


def check_url(url: str, resolver: Resolver = system_resolver) -> list[str]:
    """Verdict on a user-supplied base URL: its public addresses, or UnsafeURL with the reason."""
    host, port = _host_port(url)
    return checked_addresses(host, port, resolver)


class GuardedTransport(http.BaseTransport):
    """httpx transport that checks every request's host and connects to the checked address."""

    def __init__(self, resolver: Resolver = system_resolver, inner: http.BaseTransport | None = None):
        self.resolver = resolver
        self.inner = inner or http.HTTPTransport()

    def handle_request(self, request: http.Request) -> http.Response:
        host = request.url.host
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        address = checked_addresses(host, port, self.resolver)[0]
        if address != host.strip("[]"):
            # Pin the connection to the address just checked; Host header and TLS keep the name.
            request.extensions = {**request.extensions, "sni_hostname": host}
            request.url = request.url.copy_with(host=address)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def guarded_http_client(timeout: float, resolver: Resolver = system_resolver) -> http.Client:
    """An HTTP client for the OpenAI SDK whose every request goes through the guard.

    Environment proxies are not used (a custom transport turns them off in httpx), so the
    address checked is the address connected to.
    """
    import openai

    return openai.DefaultHttpxClient(transport=GuardedTransport(resolver), timeout=timeout)


if __name__ == "__main__":  # python -m memory.url_guard URL...: the verdicts, nothing is sent
    import sys

    for arg in sys.argv[1:]:
        try:
            print(f"allowed  {arg}  -> {', '.join(check_url(arg))}")
        except UnsafeURL as e:
            print(f"refused  {arg}  ({e})")
