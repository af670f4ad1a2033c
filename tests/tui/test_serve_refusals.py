"""``memprobe serve`` refuses what a web page, a crowd of tabs or a bad flag could make of it — each
case driven with a real HTTP / websocket client (aiohttp) against a served instance on 127.0.0.1:

- a websocket or page request whose ``Origin`` is another site, or whose ``Host`` names another host
  (DNS rebinding) or another port, gets 403 — loopback included;
- one session more than ``--max-sessions`` gets 503 with a page that names the flag;
- ``/static/`` lists no directory;
- ``--port 70000``, ``--port -1`` and a port in use end in one line and exit 2; ``--port 0`` prints the
  port the system chose;
- Ctrl-C and SIGTERM end it with its own line (not the run's resume line), no traceback, and no app
  process left behind;
- the token of an off-loopback server appears once in its output (the start line), in no log line.
"""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

REPO = Path(__file__).resolve().parents[2]
RECORDING = REPO / "recordings" / "sample-quick-fixed-user_001"


@dataclass
class Served:
    process: subprocess.Popen[str]
    url: str
    port: int
    first_line: str

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, signum: int = signal.SIGINT) -> tuple[int, str]:
        """Signal the server; its exit status and everything it printed."""
        self.process.send_signal(signum)
        out, _ = self.process.communicate(timeout=30)
        return self.process.returncode, self.first_line + out


def start(*flags: str) -> Served:
    process = subprocess.Popen([sys.executable, "-m", "memprobe_tui.main", "serve", str(RECORDING), "--port", "0",
                                *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    assert process.stdout is not None
    line = process.stdout.readline()
    match = re.search(r"open (http://[^ ]+:(\d+)/\S*)", line)
    if match is None:
        process.kill()
        raise AssertionError(line + process.stdout.read())
    return Served(process, match.group(1), int(match.group(2)), line)


@pytest.fixture
def served() -> Iterator[Served]:
    """A loopback server with room for two sessions."""
    server = start("--max-sessions", "2")
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()


def memprobe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memprobe_tui.main", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=60)


async def first_frame(ws: aiohttp.ClientWebSocketResponse) -> bytes:
    """The first terminal output of the session's app process (proof that one started)."""
    async with asyncio.timeout(60):
        async for message in ws:
            if message.type == aiohttp.WSMsgType.BINARY:
                return bytes(message.data)
    raise AssertionError("the session closed before its app drew anything")


async def test_a_websocket_from_another_sites_page_is_refused_and_one_from_the_servers_own_page_starts_an_app(
        served: Served) -> None:
    async with aiohttp.ClientSession() as http:
        for origin in ("http://attacker.example", f"http://attacker.example:{served.port}", "null",
                       f"http://localhost:{served.port + 1}"):
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(f"{served.base}/ws", headers={"Origin": origin})
            assert refused.value.status == 403, origin
        async with http.get(f"{served.base}/", headers={"Origin": "http://attacker.example"}) as page:
            assert page.status == 403
            assert "only pages served by this server" in await page.text()
        async with http.ws_connect(f"{served.base}/ws", headers={"Origin": served.base}) as ws:
            assert await first_frame(ws)


async def test_a_request_naming_another_host_or_port_is_refused_on_loopback_too(served: Served) -> None:
    async with aiohttp.ClientSession() as http:
        for host in (f"attacker.example:{served.port}", "attacker.example", f"127.0.0.1:{served.port + 1}",
                     f"127.0.0.1.attacker.example:{served.port}", f"0.0.0.0:{served.port}"):
            async with http.get(f"{served.base}/", headers={"Host": host}) as page:
                assert page.status == 403, host
                assert "this server answers only to" in await page.text()
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(f"{served.base}/ws", headers={"Host": host})
            assert refused.value.status == 403, host
        for host in (f"127.0.0.1:{served.port}", f"localhost:{served.port}"):
            async with http.get(f"{served.base}/", headers={"Host": host}) as page:
                assert page.status == 200, host
                assert f"ws://{host}/ws" in await page.text()


async def test_one_session_more_than_max_sessions_gets_a_page_naming_the_flag(served: Served) -> None:
    async with aiohttp.ClientSession() as http:
        first = await http.ws_connect(f"{served.base}/ws")
        second = await http.ws_connect(f"{served.base}/ws")
        await asyncio.gather(first_frame(first), first_frame(second))
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(f"{served.base}/ws")
        assert refused.value.status == 503
        async with http.get(f"{served.base}/") as page:
            assert page.status == 503
            assert "--max-sessions 2" in await page.text()
        await first.close()
        async with asyncio.timeout(30):  # the closed tab's place is free once its app has quit
            while True:
                async with http.get(f"{served.base}/") as page:
                    if page.status == 200:
                        break
                await asyncio.sleep(0.2)
        async with http.ws_connect(f"{served.base}/ws") as third:
            assert await first_frame(third)
        await second.close()


async def test_static_folders_are_not_listed(served: Served) -> None:
    async with aiohttp.ClientSession() as http:
        for folder in ("/static/", "/static/js/", "/static/css/"):
            async with http.get(served.base + folder) as listing:
                assert listing.status in (403, 404), folder
                assert "Index of" not in await listing.text()
        async with http.get(f"{served.base}/static/js/textual.js") as script:
            assert script.status == 200


def gone(pid: int) -> bool:
    """Whether a process has exited (a zombie waiting for its parent's wait counts as exited)."""
    try:
        return "zombie" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_server_with_its_own_line_and_no_app_process_left(served: Served, signum: int) -> None:
    async def session_then_stop() -> tuple[int, int, str]:
        async with aiohttp.ClientSession() as http:
            ws = await http.ws_connect(f"{served.base}/ws")
            await first_frame(ws)
            children = subprocess.run(["pgrep", "-P", str(served.process.pid)], capture_output=True, text=True)
            assert len(children.stdout.split()) == 1, children.stdout  # one process per tab (no shell between)
            code, out = served.stop(signum)
            return int(children.stdout), code, out

    app_pid, code, out = asyncio.run(session_then_stop())
    assert code == 0, out
    assert out.splitlines()[-1] == "memprobe serve: stopped (1 session closed)", out
    assert "interrupted" not in out and "Traceback" not in out, out
    assert gone(app_pid)


def test_the_stop_line_is_the_servers_own(served: Served) -> None:
    code, out = served.stop(signal.SIGINT)
    assert code == 0
    assert out.splitlines()[-1] == "memprobe serve: stopped (0 sessions closed)"
    assert "interrupted" not in out and "Traceback" not in out


@pytest.mark.parametrize("port", ["70000", "-1", "busy"])
def test_an_unusable_or_busy_port_ends_in_one_line_and_exit_2(port: str) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        number = str(holder.getsockname()[1]) if port == "busy" else port
        done = memprobe("serve", str(RECORDING), "--port", number)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr and f"{number}" in done.stderr and "--port" in done.stderr


def test_port_0_prints_the_port_the_system_chose(served: Served) -> None:
    assert served.port != 0
    with socket.create_connection(("127.0.0.1", served.port), timeout=10):
        pass


async def test_the_token_of_an_off_loopback_server_is_in_no_log_line() -> None:
    server = start("--host", "0.0.0.0")
    try:
        token = server.url.split("?token=", 1)[1]
        assert token
        async with aiohttp.ClientSession() as http:
            async with http.get(server.url) as page:  # the printed URL: page and cookie
                assert page.status == 200
            async with http.get(f"{server.base}/?token=wrong") as wrong:
                assert wrong.status == 403
            async with http.get(f"{server.base}/static/js/textual.js?token={token}") as script:
                assert script.status == 200
            async with http.ws_connect(f"{server.base}/ws?token={token}") as ws:
                assert await first_frame(ws)
            async with http.get(f"{server.base}/", headers={"Host": f"rebound.example:{server.port}"}) as foreign:
                assert foreign.status == 403  # a foreign name is refused even with the token's cookie
        code, out = server.stop(signal.SIGTERM)
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()
    assert code == 0
    assert out.count(token) == 1 and token in out.splitlines()[0], out  # the start line only
    assert "GET /static/js/textual.js 200" in out  # requests were logged, without their query strings
