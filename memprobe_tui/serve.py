"""``memprobe serve``: the same TUI in a browser tab, through textual-serve.

textual-serve starts one app process per browser tab (the command below, under Textual's web
driver) and relays its terminal output over a websocket to xterm.js. Every request must name this
server in its ``Host`` and, when it carries an ``Origin``, come from this server's own page
(:mod:`memprobe_tui.serve_guard` says why: any web page could otherwise drive a loopback server).
On 127.0.0.1 only this machine's users can connect; bound to any other address, anyone who can reach
the port could read the recordings, so every request must then carry a random token: the URL printed
at start holds it as ``?token=…``, and the index page sets it as a same-site cookie that the page's
own websocket and downloads send back. The page's URLs are built from the request's (checked) Host
header, not the bind address, so a server bound to 0.0.0.0 hands the browser an address it can reach.
At most ``max_sessions`` app processes live at once; one more tab gets a page that says so.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import shlex
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp_jinja2
import jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from memprobe_tui.serve_guard import LOOPBACK, HostPolicy, PathAccessLogger, listen, refusal, setup_logging

TOKEN_COOKIE = "memprobe_token"
#: Seconds an app process gets to quit after the server asks it to, before it is killed.
APP_QUIT_S = 5.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
log = logging.getLogger("memprobe.serve")


def app_command(target: Path, no_color: bool) -> str:
    """The shell command textual-serve runs per tab: ``replay`` for a recording, ``tui`` for a folder.

    ``exec`` makes the shell become the app, so a tab is one process rather than a shell and its child."""
    verb = "replay" if (target / "header.json").is_file() else "tui"
    argv = [sys.executable, "-m", "memprobe_tui.main", verb, str(target.resolve())]
    return "exec " + shlex.join(argv + (["--no-color"] if no_color else []))


class SessionService(AppService):
    """textual-serve's app process, in a session of its own: a Ctrl-C in the server's terminal reaches
    the server alone, which then asks each app to quit (the apps printed a traceback each before)."""

    async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
        self._process = process = await asyncio.create_subprocess_shell(
            self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=self._build_environment(width=width, height=height),
            start_new_session=True)
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    async def stop(self) -> None:
        """Ask the app to quit; kill it if it has not within :data:`APP_QUIT_S` seconds."""
        try:
            await asyncio.wait_for(super().stop(), APP_QUIT_S)
        except (asyncio.TimeoutError, OSError):
            pass
        process = self._process
        if process is not None and process.returncode is None:
            process.kill()
            await process.wait()


class TokenServer(Server):
    """textual-serve's server with MemProbe's checks: Host and Origin, the token when ``token`` is set,
    a cap on live sessions, no directory listings, and no query string in the access log."""

    def __init__(self, command: str, *, host: str, port: int, token: str | None, title: str,
                 max_sessions: int) -> None:
        super().__init__(command, host=host, port=port, title=title)
        self.token = token
        self.max_sessions = max_sessions
        self.sessions: dict[web.WebSocketResponse, SessionService | None] = {}

    @property
    def policy(self) -> HostPolicy:
        return HostPolicy(self.host, self.port)

    def url(self) -> str:
        """The address to open (holds the token when one is required)."""
        return f"http://{self.policy.shown()}/" + (f"?token={self.token}" if self.token else "")

    async def _make_app(self) -> web.Application:
        """textual-serve's routes, with the static folder served without directory listings."""
        app = web.Application(middlewares=[self._check_request])
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path))
        app.add_routes([
            web.get("/", self.handle_index, name="index"),
            web.get("/ws", self.handle_websocket, name="websocket"),
            web.get("/download/{key}", self.handle_download, name="download"),
            web.static("/static", self.statics_path, show_index=False, name="static"),
        ])
        return app

    @web.middleware
    async def _check_request(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Host and Origin first (every request), then the token when one is required."""
        reason = refusal(request, self.policy)
        if reason is not None:
            log.info(reason)
            raise web.HTTPForbidden(text=f"memprobe serve: {reason}\n")
        if self.token is None:
            return await handler(request)
        offered = request.query.get("token") or request.cookies.get(TOKEN_COOKIE) or ""
        if not hmac.compare_digest(offered.encode(), self.token.encode()):
            raise web.HTTPForbidden(text="memprobe serve: this address needs the token printed at start (?token=…).\n")
        response = await handler(request)
        if request.query.get("token"):  # the page's websocket and downloads carry it as a cookie from here on
            response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="Strict")
        return response

    def _full(self) -> web.HTTPServiceUnavailable | None:
        """The refusal for one session more than the cap, or None while there is room."""
        if len(self.sessions) < self.max_sessions:
            return None
        text = (f"memprobe serve: {len(self.sessions)} sessions are open, the most this server runs at once "
                f"(--max-sessions {self.max_sessions}). Close a browser tab showing MemProbe and reload, or "
                "restart memprobe serve with a larger --max-sessions.\n")
        return web.HTTPServiceUnavailable(text=text)

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> dict[str, Any]:
        if (full := self._full()) is not None:
            raise full
        origin = f"{request.scheme}://{request.host}"
        static = request.app.router["static"].url_for(filename="/")
        websocket = request.app.router["websocket"].url_for()
        return {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": ("wss" if request.scheme == "https" else "ws") + f"://{request.host}{websocket}",
            "config": {"static": {"url": f"{origin}{static}".rstrip("/") + "/"}},
            "application": {"name": self.title},
        }

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """One app process per websocket, within the cap (refused with 503 before the upgrade)."""
        if (full := self._full()) is not None:
            log.info("refused a session: %d of %d open", len(self.sessions), self.max_sessions)
            raise full
        websocket = web.WebSocketResponse(heartbeat=15)
        self.sessions[websocket] = None  # counted before the first await, so two tabs cannot both take the last place
        try:
            await websocket.prepare(request)

            async def close() -> None:  # the app quit: end its tab's websocket
                await websocket.close()

            service = SessionService(self.command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                                     close=close, download_manager=self.download_manager,
                                     debug=self.debug)
            self.sessions[websocket] = service
            await service.start(to_int(request.query.get("width", "80"), 80),
                                to_int(request.query.get("height", "24"), 24))
            await self._process_messages(websocket, service)
        except (asyncio.CancelledError, ConnectionError):
            pass
        except Exception as error:  # one line, not a traceback with locals
            log.info("a session ended on %s: %s", type(error).__name__, error)
        finally:
            service_left = self.sessions.pop(websocket, None)
            if service_left is not None:
                await service_left.stop()
            await websocket.close()
        return websocket

    async def close_sessions(self) -> int:
        """Stop every app process and close its websocket; how many there were."""
        live = list(self.sessions.items())
        await asyncio.gather(*(service.stop() for _, service in live if service is not None), return_exceptions=True)
        await asyncio.gather(*(websocket.close() for websocket, _ in live), return_exceptions=True)
        return len(live)

    async def run(self, sock: socket.socket) -> int:
        """Serve on ``sock`` until SIGINT or SIGTERM; then stop every session. Returns how many were open."""
        self.port = int(sock.getsockname()[1])  # the real one when --port 0 asked the system for a free port
        runner = web.AppRunner(await self._make_app(), handle_signals=False, access_log_class=PathAccessLogger)
        await runner.setup()
        await web.SockSite(runner, sock, shutdown_timeout=APP_QUIT_S).start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        # Only now: a Ctrl-C right after the URL appears must reach the handler, not interrupt Python.
        print(f"memprobe serve: open {self.url()}  (Ctrl+C stops)", flush=True)
        try:
            await stop.wait()
            closed = await self.close_sessions()
            await runner.cleanup()
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
        return closed


def serve(target: Path, *, host: str, port: int, no_color: bool, max_sessions: int) -> None:
    """Serve the TUI for ``target`` (a recording or a folder of them) until Ctrl+C or SIGTERM.

    The port is bound before anything prints, so a busy or forbidden port ends in the caller's one
    line (:class:`~memprobe_engine.errors.ConfigError`)."""
    sock = listen(host, port)
    token = None if host in LOOPBACK else secrets.token_urlsafe(18)
    server = TokenServer(app_command(target, no_color), host=host, port=port, token=token,
                         title=f"MemProbe — {target}", max_sessions=max_sessions)
    setup_logging()
    closed = asyncio.run(server.run(sock))
    print(f"memprobe serve: stopped ({closed} session{'s' if closed != 1 else ''} closed)", flush=True)
