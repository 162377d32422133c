"""Settings → Agent keys in a real browser (Chromium) on the real app.py (tests/ui_fixtures.py's `live_app`):
the key made in the page is shown once and listed with its name and last use; an MCP client holding it (the
real `mcp` client, key in the Authorization header) writes into that browser's memory, which the page shows
after a reload; the browser's own id, decrypted from its storage as anyone holding it can, is refused alone;
once revoked in the page, the key is refused."""

from __future__ import annotations

import pytest

from sessions.agent_keys import PAGE_ID_ALONE
from tests.test_mcp_keys import call
from tests.ui_fixtures import PAGE_WAIT, chromium_browser

browser = pytest.fixture(scope="module")(chromium_browser)


def browser_id(page, url: str) -> str:
    """The page's user id as anyone holding the browser's storage reads it (the issue's finding): the stored
    value, decrypted with the gr.BrowserState secret that the app serves in /config. CryptoJS's passphrase
    form: OpenSSL's "Salted__" layout, key and IV from MD5 rounds over the passphrase (the secret's SHA-256
    in hex) and the salt."""
    import base64
    import hashlib
    import json
    import urllib.request

    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    stored = page.evaluate("() => localStorage.getItem('memory_chat_user')")
    with urllib.request.urlopen(url + "/config", timeout=30) as r:
        config = json.load(r)
    secret = next(
        c["props"]["secret"]
        for c in config["components"]
        if c.get("props", {}).get("storage_key") == "memory_chat_user"
    )
    blob = base64.b64decode(stored.split(":", 1)[1])
    assert blob[:8] == b"Salted__"
    salt, body = blob[8:16], blob[16:]
    passphrase = hashlib.sha256(secret.encode()).hexdigest().encode()
    derived, block = b"", b""
    while len(derived) < 48:
        block = hashlib.md5(block + passphrase + salt).digest()
        derived += block
    dec = Cipher(algorithms.AES(derived[:32]), modes.CBC(derived[32:48])).decryptor()
    plain = dec.update(body) + dec.finalize()
    return json.loads(plain[: -plain[-1]])


def key_list(page) -> str:
    return page.inner_text("#key-list")


def open_keys(page) -> None:
    """Open Settings, then its Agent keys fold (opening it lists the keys)."""
    page.get_by_text("Settings", exact=True).first.click()
    page.get_by_text("Agent keys (for MCP clients and scripts)").first.click()
    page.wait_for_function(
        "() => /No agent keys yet|Last use/.test((document.querySelector('#key-list') || {innerText: ''}).innerText)",
        timeout=PAGE_WAIT,
    )


@pytest.mark.slow
def test_a_key_made_in_settings_is_shown_once_listed_used_by_an_agent_and_revoked(browser, live_app):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(live_app.url)
    page.wait_for_selector("#session-header", timeout=PAGE_WAIT)
    open_keys(page)
    assert "No agent keys yet" in key_list(page)

    page.locator("#key-name input, #key-name textarea").first.fill("Claude Desktop")
    page.click("#make-key-btn")
    page.wait_for_selector("#new-key-once", timeout=PAGE_WAIT)
    key = page.inner_text("#new-key-once code.mc-agent-key").strip()
    assert key.startswith("mem.") and "not shown again" in page.inner_text("#new-key-once")
    page.wait_for_function(
        "() => document.querySelector('#key-list').innerText.includes('Claude Desktop')", timeout=PAGE_WAIT
    )
    row = key_list(page)
    assert key[:12] in row and key not in row and "never" in row  # name, prefix, last use: never

    # An agent holding the key writes into this browser's memory.
    url = live_app.url + "/gradio_api/mcp/"
    err, text = call(url, "send_message", key, user_id="", message="Note from my agent: the hives need checking.")
    assert not err, text
    # The browser's own id, read out of its storage, opens nothing alone; beside its key it names the same memory.
    uid = browser_id(page, live_app.url)
    err, text = call(url, "export_memory", user_id=uid)
    assert err and PAGE_ID_ALONE in text, text
    err, text = call(url, "export_memory", key, user_id=uid)
    assert not err and "hives" in text, text

    # Listed again (the fold closed and opened): the key is gone from the page, its last use is shown.
    page.get_by_text("Agent keys (for MCP clients and scripts)").first.click()
    page.get_by_text("Agent keys (for MCP clients and scripts)").first.click()
    page.wait_for_function(
        "() => !document.querySelector('#new-key-once') && "
        "!/never/.test(document.querySelector('#key-list tbody').innerText)",
        timeout=PAGE_WAIT,
    )
    assert key not in page.content()

    # Revoked in the page: the agent is refused from then on.
    page.click("#revoke-btn")
    page.wait_for_function("() => /Revoked/.test(document.querySelector('#keys-status').innerText)", timeout=PAGE_WAIT)
    assert "revoked" in key_list(page)
    err, text = call(url, "export_memory", key, user_id="")
    assert err and "revoked on" in text, text

    # The page shows what the agent said, in its open session.
    page.reload()
    page.wait_for_function(
        "() => document.querySelector('#chat') && document.querySelector('#chat').innerText.includes('hives')",
        timeout=PAGE_WAIT,
    )
    assert not errors, errors
    ctx.close()
