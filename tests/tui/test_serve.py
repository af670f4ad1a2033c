"""``memprobe serve`` in a real headless Chromium: the page loads, its websocket starts the app, and the
overview of a shipped recording appears in the page.

textual-serve draws with xterm.js on a canvas (WebGL), so the text is not in the page's DOM by default.
The test drives Chromium over its DevTools protocol: a script injected before the page's own catches
the xterm.js terminal the page creates and switches on its screen-reader mode, in which xterm.js keeps
a DOM mirror of the screen (``.xterm-accessibility-tree``, one element per row); the test reads that
DOM. Without a Chromium the test skips with the reason (``.ci/run`` installs Debian's ``chromium``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

REPO = Path(__file__).resolve().parents[2]
RECORDING = REPO / "recordings" / "sample-quick-fixed-user_001"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")

#: Runs before the page's scripts: textual-serve's client stores its xterm.js Terminal as ``this.terminal``;
#: a setter on Object.prototype sees that assignment, keeps the property a plain one, and turns on the
#: terminal's screen-reader mode (its rows mirrored into the DOM).
CATCH_TERMINAL = """
Object.defineProperty(Object.prototype, "terminal", {configurable: true, set(value) {
  Object.defineProperty(this, "terminal", {value, writable: true, configurable: true, enumerable: true});
  if (value && value.options && value.buffer) { value.options.screenReaderMode = true; }
}});
"""
SCREEN_TEXT = "Array.from(document.querySelectorAll('.xterm-accessibility-tree > div')).map(r => r.textContent).join('\\n')"


def find_browser() -> str | None:
    return os.environ.get("MEMPROBE_CHROMIUM") or next(filter(None, map(shutil.which, BROWSERS)), None)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def browser() -> str:
    found = find_browser()
    if found is None:
        pytest.skip("no Chromium on PATH (chromium, chromium-browser, google-chrome; or set MEMPROBE_CHROMIUM): "
                    "the browser test of `memprobe serve` did not run; .ci/run installs Debian's chromium")
    return found


@pytest.fixture
def served() -> Iterator[str]:
    """``memprobe serve`` on the shipped make-demo recording, bound to 0.0.0.0 (so a token is required);
    yields the URL it prints."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "memprobe_tui.main", "serve", str(RECORDING), "--host", "0.0.0.0",
                               "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              cwd=REPO)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert "open http://" in line, line + server.stdout.read(2000)
        url = line.split("open ", 1)[1].split()[0]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the server prints the URL before it listens
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_server_bound_beyond_loopback_refuses_requests_without_its_token(served: str) -> None:
    assert "?token=" in served
    bare = served.split("?", 1)[0]
    for address in (bare, bare + "ws", bare + "static/js/textual.js", bare + "?token=not-the-token"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(address, timeout=10)
        assert refused.value.code == 403, address
    with urllib.request.urlopen(served, timeout=10) as page:
        assert "memprobe_token=" in page.headers["Set-Cookie"]
        assert "ws://127.0.0.1:" in page.read().decode()  # the page's websocket follows the address it was loaded from


async def screen_text_in_chromium(browser: str, url: str, wanted: list[str], seconds: float) -> str:
    """Load ``url`` in headless Chromium; the screen's rows once all of ``wanted`` show (or at the deadline)."""
    with tempfile.TemporaryDirectory() as profile:
        chromium = subprocess.Popen([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                     "--remote-debugging-port=0", f"--user-data-dir={profile}",
                                     "--window-size=1280,800", "about:blank"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            active = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + 30
            while not (active.exists() and len(active.read_text().split()) == 2) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            devtools_port = active.read_text().split()[0]
            async with aiohttp.ClientSession() as http:
                async with http.get(f"http://127.0.0.1:{devtools_port}/json/list") as listing:
                    pages = [t for t in await listing.json() if t["type"] == "page"]
                async with http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as devtools:
                    ids = iter(range(1, 1_000_000))

                    async def call(method: str, **params: Any) -> Any:
                        call_id = next(ids)
                        await devtools.send_str(json.dumps({"id": call_id, "method": method, "params": params}))
                        async for message in devtools:
                            reply = json.loads(message.data)
                            if reply.get("id") == call_id:
                                return reply.get("result")
                        raise AssertionError(f"Chromium closed the DevTools connection during {method}")

                    await call("Page.enable")
                    await call("Page.addScriptToEvaluateOnNewDocument", source=CATCH_TERMINAL)
                    await call("Page.navigate", url=url)
                    text = ""
                    deadline = time.monotonic() + seconds
                    while time.monotonic() < deadline:
                        result = await call("Runtime.evaluate", expression=SCREEN_TEXT, returnByValue=True)
                        text = str(result["result"].get("value", ""))
                        if all(w in text for w in wanted):
                            break
                        await asyncio.sleep(0.25)
                    return text
        finally:
            chromium.terminate()
            chromium.wait(timeout=10)


def test_chromium_shows_the_overview_of_a_served_recording(browser: str, served: str) -> None:
    wanted = ["fixed dialogues", "longctx_full", "user_001", "0.583"]  # the overview's title and board (Table 2 figures)
    text = asyncio.run(screen_text_in_chromium(browser, served, wanted, seconds=60))
    assert all(w in text for w in wanted), f"the page showed:\n{text}"
