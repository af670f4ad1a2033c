"""``memprobe serve``: the same TUI in a browser tab, through textual-serve.

textual-serve starts one app process per browser tab (the command below, under Textual's web
driver) and relays its terminal output over a websocket to xterm.js. On 127.0.0.1 only this machine's
users can connect; bound to any other address, anyone who can reach the port could read the
recordings, so every request must then carry a random token: the URL printed at start holds it as
``?token=…``, and the index page sets it as a same-site cookie that the page's own websocket and
downloads send back. The page's URLs are built from the request's Host header, not the bind
address, so a server bound to 0.0.0.0 hands the browser an address it can reach.
"""

from __future__ import annotations

import hmac
import secrets
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp_jinja2
from aiohttp import web
from textual_serve.server import Server, to_int

LOOPBACK = ("127.0.0.1", "localhost", "::1")
TOKEN_COOKIE = "memprobe_token"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def app_command(target: Path, no_color: bool) -> str:
    """The shell command textual-serve runs per tab: ``replay`` for a recording, ``tui`` for a folder."""
    verb = "replay" if (target / "header.json").is_file() else "tui"
    argv = [sys.executable, "-m", "memprobe_tui.main", verb, str(target.resolve())]
    return shlex.join(argv + (["--no-color"] if no_color else []))


class TokenServer(Server):
    """textual-serve's server, with a token check when ``token`` is set and host-relative page URLs."""

    def __init__(self, command: str, *, host: str, port: int, token: str | None, title: str) -> None:
        super().__init__(command, host=host, port=port, title=title)
        self.token = token

    def url(self) -> str:
        """The address to open (holds the token when one is required)."""
        shown = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{shown}:{self.port}/" + (f"?token={self.token}" if self.token else "")

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        if self.token is not None:
            app.middlewares.append(self._check_token)
        return app

    @web.middleware
    async def _check_token(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        assert self.token is not None
        offered = request.query.get("token") or request.cookies.get(TOKEN_COOKIE) or ""
        if not hmac.compare_digest(offered.encode(), self.token.encode()):
            raise web.HTTPForbidden(text="memprobe serve: this address needs the token printed at start (?token=…).\n")
        response = await handler(request)
        if request.query.get("token"):  # the page's websocket and downloads carry it as a cookie from here on
            response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="Strict")
        return response

    async def on_startup(self, app: web.Application) -> None:
        self.console.print(f"memprobe serve: open {self.url()}  (Ctrl+C stops)", highlight=False, soft_wrap=True)

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> dict[str, Any]:
        origin = f"{request.scheme}://{request.host}"
        static = request.app.router["static"].url_for(filename="/")
        websocket = request.app.router["websocket"].url_for()
        return {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": ("wss" if request.scheme == "https" else "ws") + f"://{request.host}{websocket}",
            "config": {"static": {"url": f"{origin}{static}".rstrip("/") + "/"}},
            "application": {"name": self.title},
        }


def serve(target: Path, *, host: str, port: int, no_color: bool) -> None:
    """Serve the TUI for ``target`` (a recording or a folder of them) until Ctrl+C."""
    token = None if host in LOOPBACK else secrets.token_urlsafe(18)
    server = TokenServer(app_command(target, no_color), host=host, port=port, token=token,
                         title=f"MemProbe — {target}")
    server.serve()
