"""Refuse user-supplied LLM URLs that point inside the server's network.

A visitor who may choose the base URL could otherwise make the server send
requests to its own loopback, the private network or a cloud metadata address.
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

_NAT64 = ipaddress.ip_network("64:ff9b::/96")


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
    """Why this IP address is refused (None: it is a public address)."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        # IPv4 carried inside IPv6 is judged as the IPv4 address it reaches.
        inner = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if inner is None and ip in _NAT64:
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if inner is not None:
            return address_refusal(str(inner))
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local (where cloud metadata lives)"
    if ip.is_multicast:
        return "multicast"
    if ip.is_private:
        return "private-network"
    if not ip.is_global:
        return "reserved, not publicly routable"
    return None


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
            article = "an" if why[0] in "aeiou" else "a"
            raise UnsafeURL(
                f"{shown} is {article} {why} address; this server only calls public addresses "
                "for a URL chosen in the settings"
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
