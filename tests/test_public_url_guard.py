"""The URL guard: user-chosen base URLs never make the server call loopback, private or metadata addresses.

Private, link-local and metadata addresses are judged by the guard's verdict only (IP literals
are never resolved, names go through a fake resolver): a broken guard still sends nothing off
this machine. Loopback is tested for real: a counting HTTP server on 127.0.0.1 must see no request.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memory.errors import InvalidOptions, LLMError
from memory.settings import LLMConfig, Settings
from memory.url_guard import GuardedTransport, UnsafeURL, address_refusal, check_url
from memory.url_guard import http as httpx  # the HTTP library of the openai client
from sessions import new_user_id, open_service
from tests.fakes import ScriptedAgent
from tests.flat_service import FlatService

# (host as typed in a URL, kind of refusal expected in the message)
REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.8.9.10", "loopback"),
    ("[::1]", "loopback"),
    ("0.0.0.0", "unspecified"),
    ("[::]", "unspecified"),
    ("10.0.0.1", "private"),
    ("172.16.5.4", "private"),
    ("192.168.1.1", "private"),
    ("[fd00::1]", "private"),
    ("[fd00:ec2::254]", "private"),
    ("169.254.169.254", "link-local"),
    ("169.254.170.2", "link-local"),
    ("[fe80::1]", "link-local"),
    ("100.64.0.1", "reserved"),
    ("100.100.100.200", "reserved"),
    ("198.18.0.1", "private"),
    ("224.0.0.251", "multicast"),
    ("[ff02::1]", "multicast"),
    ("240.0.0.1", "private"),
    ("[::ffff:127.0.0.1]", "loopback"),
    ("[::ffff:169.254.169.254]", "link-local"),
    ("[::ffff:10.0.0.1]", "private"),
    ("[64:ff9b::a9fe:a9fe]", "link-local"),
    ("[2002:a00:1::]", "private"),
]


def no_dns(host, port):
    raise AssertionError(f"an IP literal must not be resolved ({host})")


@pytest.mark.parametrize("host,kind", REFUSED)
def test_guard_refuses_internal_addresses(host, kind):
    with pytest.raises(UnsafeURL) as e:
        check_url(f"http://{host}:8080/v1", resolver=no_dns)
    assert kind in str(e.value)


@pytest.mark.parametrize(
    "name,address",
    [
        ("metadata.google.internal", "169.254.169.254"),
        ("intranet.example", "10.1.2.3"),
        ("rebound.example", "127.0.0.1"),
        ("v6.example", "fd12:3456::1"),
    ],
)
def test_guard_refuses_names_that_resolve_inside(name, address):
    with pytest.raises(UnsafeURL) as e:
        check_url(f"https://{name}/v1", resolver=lambda h, p: [address])
    assert address in str(e.value)


def test_one_internal_address_among_public_ones_is_enough_to_refuse():
    with pytest.raises(UnsafeURL):
        check_url("https://mixed.example/v1", resolver=lambda h, p: ["93.184.216.34", "10.0.0.7"])


def test_public_addresses_pass_the_verdict():
    for a in ("93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"):
        assert address_refusal(a) is None
    assert check_url("https://api.example.com/v1", resolver=lambda h, p: ["93.184.216.34"]) == ["93.184.216.34"]
    with pytest.raises(UnsafeURL):
        check_url("ftp://example.com/v1")


# --- loopback for real: a counting server sees no request ------------------------------------------------


class Counting(BaseHTTPRequestHandler):
    hits = 0

    def _any(self):
        type(self).hits += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(
            b'{"id":"x","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,'
            b'"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}'
        )

    do_GET = do_POST = _any

    def log_message(self, *a):
        pass


@pytest.fixture
def counting_server():
    Counting.hits = 0
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def test_loopback_urls_are_refused_at_save_before_any_request(tmp_path, counting_server):
    port = counting_server
    svc = FlatService(open_service(Settings(data_dir=tmp_path), ScriptedAgent(), allow_llm_change=True))
    uid = new_user_id()
    for url in (
        f"http://127.0.0.1:{port}/v1",
        f"http://localhost:{port}/v1",
        f"http://[::1]:{port}/v1",
        f"http://LOCALHOST:{port}/v1",
    ):
        with pytest.raises(InvalidOptions) as e:
            svc.save_settings(uid, {}, {"backend": "openai", "model": "m", "base_url": url})
        assert "refused" in str(e.value) and "loopback" in str(e.value)
    assert "llm" not in svc.prefs(uid)
    assert Counting.hits == 0


def test_the_deployers_own_local_url_is_trusted(tmp_path, counting_server):
    url = f"http://127.0.0.1:{counting_server}/v1"
    settings = Settings(data_dir=tmp_path, llm=LLMConfig(backend="openai", model="m", base_url=url))
    svc = FlatService(open_service(settings, ScriptedAgent(), allow_llm_change=True))
    uid = new_user_id()
    svc.save_settings(uid, {}, {"backend": "openai", "model": "m", "base_url": url})
    assert svc.llm(uid) is None  # the process default, unguarded
    assert Counting.hits == 0


def test_a_url_saved_before_the_guard_is_checked_at_request_time(tmp_path, counting_server):
    """A stored choice that points at loopback (e.g. saved by an older version): the reply's request is
    refused by the transport, without retries, and the server sees nothing."""
    from memory.llm import OpenAIChat

    url = f"http://localhost:{counting_server}/v1"
    svc = FlatService(open_service(Settings(data_dir=tmp_path), ScriptedAgent(), allow_llm_change=True))
    uid = new_user_id()
    svc.store.set_prefs(uid, {"llm": {"backend": "openai", "model": "m", "base_url": url}})
    cfg = svc.llm(uid)
    assert cfg is not None
    assert cfg.guard_url and cfg.base_url == url and cfg.api_key == ""
    with pytest.raises(LLMError) as e:
        OpenAIChat(cfg).chat([{"role": "user", "content": "hi"}], temperature=0, max_tokens=5)
    assert "refused" in str(e.value)
    assert Counting.hits == 0
    # Control: the same client without the guard does reach the server (so zero above means refused).
    OpenAIChat(LLMConfig(backend="openai", model="m", base_url=url)).chat(
        [{"role": "user", "content": "hi"}], temperature=0, max_tokens=5
    )
    assert Counting.hits == 1


def test_redirects_to_internal_addresses_are_not_followed(counting_server):
    seen = []

    def upstream(request: httpx.Request) -> httpx.Response:  # an in-memory "public" server
        seen.append(str(request.url))
        return httpx.Response(302, headers={"Location": f"http://127.0.0.1:{counting_server}/v1/steal"})

    t = GuardedTransport(resolver=lambda h, p: ["93.184.216.34"], inner=httpx.MockTransport(upstream))
    with httpx.Client(transport=t, follow_redirects=True) as client, pytest.raises(UnsafeURL):
        client.get("https://llm.example/v1/models")
    assert len(seen) == 1 and Counting.hits == 0


def test_each_request_is_resolved_again_and_pinned_to_the_checked_address(counting_server):
    """DNS rebinding: the name is public when saved, loopback at request time: refused. A public answer
    is pinned: the connection goes to the checked address, the Host header and TLS name stay."""
    answers = iter([["93.184.216.34"], ["127.0.0.1"]])

    def resolver(host, port):
        return next(answers)

    check_url("https://rebind.example/v1", resolver=resolver)  # first answer: public
    got: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        got.append(request)
        return httpx.Response(200)

    t = GuardedTransport(resolver=resolver, inner=httpx.MockTransport(answer))
    with httpx.Client(transport=t) as client, pytest.raises(UnsafeURL):
        client.get(f"http://rebind.example:{counting_server}/v1/models")
    assert got == [] and Counting.hits == 0

    t = GuardedTransport(resolver=lambda h, p: ["93.184.216.34"], inner=httpx.MockTransport(answer))
    with httpx.Client(transport=t) as client:
        client.get("https://llm.example/v1/models")
    assert got[0].url.host == "93.184.216.34" and got[0].headers["host"] == "llm.example"
    assert got[0].extensions["sni_hostname"] == "llm.example"
