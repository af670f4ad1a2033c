"""A small HTTP/1.1 server on asyncio streams, parsed by ``h11``, for the loopback recording proxy.

Why not a web framework: none is installed with the project, and the proxy needs only three routes
on 127.0.0.1 — JSON in, JSON or server-sent events out, keep-alive so a library's connection pool
is reused. ``h11`` (already present under the ``openai`` client's HTTP stack) does the protocol
parsing, so framing, chunked bodies and keep-alive follow the RFC rather than our own guesses.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import h11
import orjson

#: Request bodies above this are refused (a runaway client must not exhaust memory).
MAX_BODY_BYTES = 64 * 1024 * 1024
#: A connection that sends nothing for this long is closed: an idle keep-alive socket or a client
#: that stalls mid-request must not hold a connection (and its buffers) for ever.
IDLE_TIMEOUT_S = 120.0
_READ_CHUNK = 65536


class _TooLarge(Exception):
    """A request body over :data:`MAX_BODY_BYTES`, announced or received: answered 413, then closed."""


@dataclass
class HTTPRequest:
    """One parsed request: method, path (without the query), lower-case headers, raw body."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> object:
        return orjson.loads(self.body) if self.body else None


@dataclass
class HTTPResponse:
    """A complete response, or (``stream`` set) server-sent events written as they come."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    stream: AsyncIterator[bytes] | None = None

    @classmethod
    def json(cls, status: int, value: object, headers: dict[str, str] | None = None) -> HTTPResponse:
        return cls(status=status, body=orjson.dumps(value), headers=headers or {})


Handler = Callable[[HTTPRequest], Awaitable[HTTPResponse]]


async def _discard_rest(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read and drop what the client still sends (for a short while), so closing the socket does not
    reset it before the client has read the answer sent ahead of its body."""
    with contextlib.suppress(Exception):
        writer.write_eof()
        async with asyncio.timeout(5.0):
            while await reader.read(_READ_CHUNK):
                pass


class LoopbackHTTPServer:
    """Serve ``handler`` on ``host`` (a loopback address) and a free port chosen by the OS."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0) -> None:
        self._handler = handler
        self._host = host
        self._port = port
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the server is not started")
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def host(self) -> str:
        return self._host

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._connection, self._host, self._port)

    async def aclose(self) -> None:
        """Stop listening and drop open connections (their clients see a closed socket)."""
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(BaseException):
                await task
        await self._server.wait_closed()
        self._server = None

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                try:
                    request = await self._read_request(conn, reader)
                except _TooLarge:
                    await self._write_response(conn, writer, HTTPResponse.json(413, {"error": {
                        "message": f"the request body is over {MAX_BODY_BYTES >> 20} MB; send a smaller one",
                        "type": "invalid_request_error"}}, {"connection": "close"}))
                    await _discard_rest(reader, writer)
                    break
                if request is None:
                    break
                try:
                    response = await self._handler(request)
                except Exception as err:  # noqa: BLE001 - a handler bug answers 500; other requests go on
                    response = HTTPResponse.json(500, {"error": {"message": f"{type(err).__name__}: {err}",
                                                                 "type": "proxy_error"}},
                                                 {"x-should-retry": "false"})
                await self._write_response(conn, writer, response)
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    break
                try:
                    conn.start_next_cycle()
                except h11.LocalProtocolError:
                    break
        except (ConnectionError, h11.RemoteProtocolError, asyncio.IncompleteReadError, TimeoutError):
            pass  # TimeoutError: idle for IDLE_TIMEOUT_S; the client sees the connection closed
        except asyncio.CancelledError:
            # Only aclose() cancels connections: end quietly (asyncio would otherwise log the
            # cancelled connection task as an unhandled exception).
            pass
        finally:
            self._connections.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _read_request(self, conn: h11.Connection, reader: asyncio.StreamReader) -> HTTPRequest | None:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await asyncio.wait_for(reader.read(_READ_CHUNK), IDLE_TIMEOUT_S)
                conn.receive_data(data)  # b"" marks the end of the stream
                continue
            if isinstance(event, h11.Request):
                head = event
                announced = dict(event.headers).get(b"content-length")
                if announced is not None and int(announced) > MAX_BODY_BYTES:
                    raise _TooLarge
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY_BYTES:
                    raise _TooLarge
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in head.headers}
                target = head.target.decode("latin-1").split("?", 1)[0]
                return HTTPRequest(method=head.method.decode("ascii"), path=target, headers=headers,
                                   body=bytes(body))
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None

    async def _write_response(self, conn: h11.Connection, writer: asyncio.StreamWriter,
                              response: HTTPResponse) -> None:
        headers = [("content-type", response.content_type), *response.headers.items()]
        if response.stream is None:
            headers.append(("content-length", str(len(response.body))))
        else:
            headers.append(("cache-control", "no-cache"))
            headers.append(("transfer-encoding", "chunked"))
        writer.write(conn.send(h11.Response(status_code=response.status, headers=headers)) or b"")
        if response.stream is None:
            if response.body:
                writer.write(conn.send(h11.Data(data=response.body)) or b"")
        else:
            async for piece in response.stream:
                writer.write(conn.send(h11.Data(data=piece)) or b"")
                await writer.drain()
        writer.write(conn.send(h11.EndOfMessage()) or b"")
        await writer.drain()
