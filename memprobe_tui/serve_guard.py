"""What ``memprobe serve`` checks before it answers: the listening socket, the Host and Origin of
every request, and an access log that never holds a query string.

A browser lets any web page send requests to a server on this machine, loopback included: a page
can open a websocket to ``ws://127.0.0.1:8000/ws`` (its ``Origin`` names the page's site), and a
DNS-rebinding page can make its own name resolve to 127.0.0.1 (its ``Host`` then names the page's
site). Either would let that page start app sessions that read every recording and spend the user's
model keys on re-runs. So a request is answered only when its ``Host`` names the address the server
listens on (or the name given with ``--host``) and its ``Origin`` is absent or that same origin.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from dataclasses import dataclass

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from memprobe_engine.errors import ConfigError

LOOPBACK = ("127.0.0.1", "localhost", "::1")
WILDCARD = ("0.0.0.0", "::", "")


def check_port(port: int) -> None:
    """Refuse a number that is not a TCP port before anything is bound (0 asks for a free one)."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port} is not a TCP port: give 1-65535, or --port 0 for a free one.")


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (its first address), or one line saying why not.

    The server binds here rather than inside aiohttp so that a busy or forbidden port ends in one
    message naming the port, and so that ``--port 0`` can print the port the system chose.
    """
    check_port(port)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                            flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as err:
        raise ConfigError(f"--host {host!r} is not an address of this machine ({err}): give an address such as "
                          "127.0.0.1, or 0.0.0.0 for every interface.") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port in TIME_WAIT after a restart is free
        sock.bind(address)
        sock.listen(128)
    except OSError as err:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {err.strerror or err}. Another program may hold the "
                          "port: choose another --port, or --port 0 for a free one.") from None
    sock.setblocking(False)
    return sock


def split_host(value: str) -> tuple[str, int | None]:
    """``"Name:8000"`` → ``("name", 8000)``; ``"[::1]:80"`` → ``("::1", 80)``; no port → ``None``.

    A port that is not a number comes back as -1, which matches no server."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif value.count(":") == 1:
        name, _, port_text = value.partition(":")
    else:  # a bare name, or a bare IPv6 address (no port can be told apart)
        name, port_text = value, ""
    if not port_text:
        return name.rstrip("."), None
    return name.rstrip("."), int(port_text) if port_text.isdigit() else -1


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class HostPolicy:
    """Which ``Host`` header values name this server.

    Bound to one address or name: that one only (on loopback, also the other loopback names, which
    no outside page can make resolve elsewhere). Bound to every interface (0.0.0.0, ::): any IP
    address of the machine written as an address, plus this machine's own host name; a foreign
    *name* is what DNS rebinding needs, and the token guards these servers too.
    """

    host: str
    port: int

    def names(self) -> frozenset[str]:
        """The host names accepted besides IP literals (for a wildcard bind)."""
        bound = self.host.lower().rstrip(".")
        if bound in WILDCARD:
            return frozenset({"localhost", socket.gethostname().lower(), socket.getfqdn().lower()})
        if bound in LOOPBACK:
            return frozenset(LOOPBACK)
        return frozenset({bound})

    def accepts(self, host_header: str | None) -> bool:
        """Whether a request's ``Host`` header names this server (name and port)."""
        if not host_header:
            return False
        name, port = split_host(host_header)
        if (port if port is not None else 80) != self.port:
            return False
        if self.host.lower() in WILDCARD and _is_ip(name):
            return True
        return name in self.names()

    def shown(self) -> str:
        """The ``host:port`` to print in the URL (an address the browser can open; IPv6 in brackets)."""
        name = "127.0.0.1" if self.host in WILDCARD else self.host
        return f"[{name}]:{self.port}" if ":" in name else f"{name}:{self.port}"


def refusal(request: web.Request, policy: HostPolicy) -> str | None:
    """Why a request must be refused (one sentence), or None when its Host and Origin are this server's."""
    host = request.headers.get("Host")
    if not policy.accepts(host):
        return (f"refused a request for host {host!r}: this server answers only to {policy.shown()} "
                "(a page on another site may not drive it; open the address printed at start).")
    origin = request.headers.get("Origin")
    if origin is not None and origin.lower() != f"{request.scheme}://{host}".lower():
        return (f"refused a request from the page at {origin!r}: only pages served by this server "
                f"(http://{policy.shown()}) may use it.")
    return None


class PathAccessLogger(AbstractAccessLogger):
    """One line per request — client, method, path, status — never the query string, where the
    token of an off-loopback server travels (aiohttp's default logs the whole request line)."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        self.logger.info("%s %s %s %s", request.remote, request.method, request.path, response.status)


def setup_logging() -> logging.Logger:
    """Plain one-line log records on stderr, no tracebacks with locals (which could show the token)."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("memprobe serve: %(message)s"))
    logger = logging.getLogger("memprobe.serve")
    for name in ("memprobe.serve", "aiohttp.access", "aiohttp.server", "aiohttp.web", "textual-serve"):
        named = logging.getLogger(name)
        named.handlers[:] = [handler]
        named.setLevel(logging.INFO)
        named.propagate = False
    return logger
