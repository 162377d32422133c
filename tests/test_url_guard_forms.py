"""The URL guard's table: every form of an internal address refused, at save time (check_url), on
the first request through GuardedTransport, and as the target of a redirect from a public server.

Nothing leaves this machine: literals are never resolved, names go through a fake resolver, and
the "public" upstream is an in-memory transport that records what reached it.
"""

from __future__ import annotations

import pytest

from memory.url_guard import GuardedTransport, UnsafeURL, address_refusal, check_url, system_resolver
from memory.url_guard import http as httpx

# Names of the table that resolve (through the fake resolver) to an internal address.
NAMES = {
    "nat64-local.example": "64:ff9b:1::7f00:1",
    "compat.example": "::127.0.0.1",
    "sitelocal.example": "fec0::1",
    "translated.example": "::ffff:0:a9fe:a9fe",
}

# (host as in the URL, a word the refusal must name). Docs: docs/reliability.md, "URL guard".
FORMS = [
    ("[::127.0.0.1]", "loopback"),  # IPv4-compatible ::/96
    ("[::808:808]", "IPv4-compatible"),  # ... refused even with a public IPv4 inside
    ("[::ffff:127.0.0.1]", "loopback"),  # IPv4-mapped ::ffff:0:0/96
    ("[::ffff:a9fe:a9fe]", "link-local"),
    ("[::ffff:0:127.0.0.1]", "loopback"),  # IPv4-translated ::ffff:0:0:0/96
    ("[::ffff:0:808:808]", "IPv4-translated"),
    ("[64:ff9b::7f00:1]", "loopback"),  # NAT64 well-known prefix 64:ff9b::/96
    ("[64:ff9b::a00:1]", "private"),
    ("[64:ff9b:1::7f00:1]", "NAT64 local-use"),  # 64:ff9b:1::/48
    ("[64:ff9b:1::808:808]", "NAT64 local-use"),
    ("[2002:7f00:1::]", "loopback"),  # 6to4 2002::/16
    ("[2002:a9fe:a9fe::1]", "link-local"),
    ("[2001:0:4136:e378:8000:63bf:f5ff:fffe]", "private"),  # Teredo, client 10.0.0.1
    ("[2001:0:7f00:1::1]", "loopback"),  # Teredo, server 127.0.0.1
    ("[fec0::1]", "site-local"),  # fec0::/10
    ("[fc00::1]", "private"),
    ("[fe80::1%25eth0]", "link-local"),  # with a zone id
    ("[::]", "unspecified"),
    ("[::1]", "loopback"),
    ("[100::1]", "reserved"),  # discard-only
    ("[2001:db8::1]", "documentation"),
    ("[3fff::1]", "documentation"),
    ("[2001:2::1]", "reserved"),  # benchmarking, inside 2001::/23
    ("[4000::1]", "not global unicast"),
    ("[ff02::1]", "multicast"),
    ("127.0.0.1", "loopback"),
    ("0.0.0.0", "unspecified"),
    ("169.254.169.254", "link-local"),
    ("10.1.2.3", "private"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("192.0.0.8", "reserved"),
    ("192.0.2.1", "documentation"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.9", "documentation"),
    ("192.88.99.1", "6to4 relay"),
    ("198.18.0.1", "benchmarking"),
    ("224.0.0.251", "multicast"),
    ("240.0.0.1", "240/4"),
    ("255.255.255.255", "broadcast"),
    *[(name, "resolves to") for name in NAMES],
]
PUBLIC = ["8.8.8.8", "[2606:4700:4700::1111]", "[::ffff:8.8.8.8]", "[64:ff9b::808:808]", "[2002:808:808::1]"]


def resolver(host: str, port: int) -> list[str]:
    if host in NAMES:
        return [NAMES[host]]
    if host == "llm.example":
        return ["93.184.216.34"]
    raise AssertionError(f"an IP literal must not be resolved ({host})")


@pytest.mark.parametrize("host,kind", FORMS)
def test_refused_when_saved(host, kind):
    with pytest.raises(UnsafeURL) as e:
        check_url(f"http://{host}:8080/v1", resolver=resolver)
    assert kind in str(e.value)


@pytest.mark.parametrize("host,kind", FORMS)
def test_refused_on_the_first_request(host, kind):
    reached: list[httpx.Request] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        reached.append(request)
        return httpx.Response(200)

    t = GuardedTransport(resolver=resolver, inner=httpx.MockTransport(upstream))
    with httpx.Client(transport=t) as client, pytest.raises(UnsafeURL) as e:
        client.get(f"http://{host}:8080/v1/models")
    assert kind in str(e.value) and reached == []


@pytest.mark.parametrize("host,kind", FORMS)
def test_refused_as_a_redirect_target(host, kind):
    reached = []

    def upstream(request: httpx.Request) -> httpx.Response:  # a public server that redirects inside
        reached.append(str(request.url))
        return httpx.Response(302, headers={"Location": f"http://{host}:8080/v1/steal"})

    t = GuardedTransport(resolver=resolver, inner=httpx.MockTransport(upstream))
    with httpx.Client(transport=t, follow_redirects=True) as client, pytest.raises(UnsafeURL) as e:
        client.get("https://llm.example/v1/models")
    assert kind in str(e.value)
    assert len(reached) == 1  # the public request only; the redirect target never reached


@pytest.mark.parametrize("host", ["2130706433", "0x7f000001", "127.1", "0177.0.0.1"])
def test_numeric_shorthands_of_loopback_are_refused(host):
    """The system resolver reads these as 127.0.0.1 (inet_aton): the resolved address is judged."""
    with pytest.raises(UnsafeURL) as e:
        check_url(f"http://{host}:8080/v1", resolver=system_resolver)
    assert "loopback" in str(e.value)


@pytest.mark.parametrize("host", PUBLIC)
def test_public_forms_pass(host):
    assert address_refusal(host.strip("[]")) is None
    assert check_url(f"https://{host}/v1", resolver=resolver)
