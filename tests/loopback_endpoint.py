"""A loopback OpenAI-compatible endpoint for engine benchmarks and tests (tests only, never product code).

It answers ``POST …/chat/completions`` with :class:`~tests.functional.recovery_oracle.RecoveryOracle`'s
scripted replies after a set latency, and ``GET …/models`` at once. It is written on bare asyncio
(HTTP/1.1 keep-alive, Content-Length bodies) so its own CPU stays small next to the engine's: on a
2-core machine the endpoint shares the cores with the run it serves.

    python -m tests.loopback_endpoint --delay 0.05 [--port 0] [--fail-after N]

prints ``listening on http://127.0.0.1:PORT/v1`` once it accepts connections. ``--fail-after N``
answers HTTP 503 to every chat request after the N-th (an endpoint going down mid-run);
``--oracle paradigms`` answers protocol B's prompts too; ``--plan DIM,DIM,…`` gives protocol A's
dimensions the oracle's planned outcomes (``recovery_oracle.plan_for``: the second on reaches the
attribution stages), where without it every dimension recovers fully. ``--hold-twins S`` holds a chat
request whose body it has not answered before until the same body arrives again or S seconds pass
(``--hold-role ROLE``: only that oracle role's), so that two processes asking one request at about the
same time have it in flight together: one that sends a request another has on its way is then
counted sending it twice, whatever the two processes' timing. ``--exit-after N`` closes the listener and exits instead (``POST …/exit-after`` with N as the body
sets it on a running endpoint, counted from then). ``GET …/stats`` answers how many chat
requests it answered and how often each distinct request body (by hash) was among them, in all and
per ``X-MemProbe-Unit`` header. A ``SIGTERM`` stops it; ``--log FILE`` then (or its exit after
``--exit-after``) receives how many chat requests it answered and the answers it delivered per unit. With ``LOOPBACK_REQUIRE_KEY`` set in its environment it
answers HTTP 401 to every request whose ``Authorization`` is not ``Bearer`` that key, and counts them
(``GET …/stats`` ``refused``). :func:`running_endpoint` starts one in its own process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from memprobe_engine.llm.types import ChatMessage, ChatRequest
from tests.functional.recovery_oracle import RecoveryOracle

_STATUS = {200: b"OK", 401: b"Unauthorized", 404: b"Not Found", 503: b"Service Unavailable"}


def _response(status: int, body: bytes) -> bytes:
    return (b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (status, _STATUS.get(status, b"Error"), len(body))) + body


class LoopbackEndpoint:
    """The endpoint's state: the oracle, the latency, how many chat requests it answered."""

    def __init__(self, delay_s: float, fail_after: int | None = None, exit_after: int | None = None,
                 oracle: str = "recovery", hold_twins_s: float = 0.0, hold_role: str | None = None) -> None:
        self.oracle = RecoveryOracle()
        self.hold_twins_s, self.hold_role = hold_twins_s, hold_role
        #: Bodies held for a twin (``--hold-twins``): digest → set when the twin arrives.
        self.held: dict[str, asyncio.Event] = {}
        if oracle == "paradigms":  # protocol B's reader and every memory system's writer prompts too
            from tests.functional.test_paradigm_run import ParadigmOracle

            self.oracle = ParadigmOracle()
        self.delay_s = delay_s
        self.fail_after = fail_after
        self.exit_after = exit_after
        self.answered = 0
        #: How many times each distinct request body was answered (GET /stats returns it).
        self.bodies: Counter[str] = Counter()
        #: Chat requests per ``X-MemProbe-Unit`` header (a role with several endpoints sends it).
        self.units: Counter[str] = Counter()
        #: How many times each distinct request body was answered per ``X-MemProbe-Unit`` header, as
        #: ``"UNIT BODY-HASH"`` (a body two units both ask is one request of each).
        self.unit_bodies: Counter[str] = Counter()
        self.stop = asyncio.Event()
        self.connections: set[asyncio.StreamWriter] = set()
        #: The key every request must carry (``LOOPBACK_REQUIRE_KEY``), None: any.
        self.required_key = os.environ.get("LOOPBACK_REQUIRE_KEY") or None
        #: Requests refused for a missing or wrong key.
        self.refused = 0
        #: The port this endpoint listens on (set once it listens).
        self.port = 0

    def chat(self, body: bytes, unit: str = "") -> tuple[int, bytes]:
        request = orjson.loads(body)
        if self.fail_after is not None and self.answered >= self.fail_after:
            return 503, b'{"error": {"message": "down for maintenance", "type": "unavailable"}}'
        messages = tuple(ChatMessage(role=m["role"], content=m["content"]) for m in request["messages"])
        _, text = self.oracle.answer(ChatRequest(model=request.get("model", "m"), messages=messages))
        self.answered += 1
        digest = hashlib.sha256(body).hexdigest()[:16]
        self.bodies[digest] += 1
        self.unit_bodies[f"{unit} {digest}"] += 1
        return 200, orjson.dumps({
            "id": f"c{self.answered}", "object": "chat.completion", "created": 0, "model": request.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}})

    async def hold_for_twin(self, body: bytes) -> None:
        """``--hold-twins``: wait for the same body from another client (or the time limit); a body
        answered before, or of another role than ``--hold-role``, is not held."""
        digest = hashlib.sha256(body).hexdigest()[:16]
        if digest in self.bodies:
            return
        if self.hold_role is not None:
            request = orjson.loads(body)
            messages = tuple(ChatMessage(role=m["role"], content=m["content"]) for m in request["messages"])
            if self.oracle.answer(ChatRequest(model="m", messages=messages))[0] != self.hold_role:
                return
        twin = self.held.get(digest)
        if twin is not None:  # the second asker: both go on
            twin.set()
            return
        arrived = self.held[digest] = asyncio.Event()
        try:
            await asyncio.wait_for(arrived.wait(), self.hold_twins_s)
        except TimeoutError:
            pass
        finally:
            self.held.pop(digest, None)

    async def serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *lines = head.decode("latin-1").split("\r\n")
                length, unit = 0, ""
                for line in lines:
                    name, _, value = line.partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                    elif name.lower() == "x-memprobe-unit":
                        unit = value.strip()
                body = await reader.readexactly(length) if length else b""
                method, path = request_line.split(" ")[:2]
                authorization = next((line.partition(":")[2].strip() for line in lines
                                      if line.partition(":")[0].lower() == "authorization"), "")
                if self.required_key is not None and not path.endswith("/stats") \
                        and authorization != f"Bearer {self.required_key}":
                    self.refused += 1
                    status, payload = 401, b'{"error": {"message": "invalid api key", "type": "invalid_request_error"}}'
                elif method == "POST" and path.endswith("/chat/completions"):
                    if self.delay_s:
                        await asyncio.sleep(self.delay_s)
                    if self.hold_twins_s:
                        await self.hold_for_twin(body)
                    status, payload = self.chat(body, unit)
                    if self.exit_after is not None and self.answered > self.exit_after:
                        self.stop.set()
                        return  # the connection drops without an answer: the endpoint died
                    if status == 200:
                        self.units[unit] += 1  # answers delivered, per unit
                elif method == "POST" and path.endswith("/exit-after"):
                    self.exit_after = self.answered + int(body or b"0")
                    status, payload = 200, b"{}"
                elif method == "GET" and path.endswith("/stats"):
                    status, payload = 200, orjson.dumps({"answered": self.answered, "bodies": self.bodies,
                                                        "units": self.units, "unit_bodies": self.unit_bodies,
                                                        "refused": self.refused, "port": self.port})
                elif method == "GET" and path.endswith("/models"):
                    status, payload = 200, b'{"object": "list", "data": [{"id": "scripted"}]}'
                else:
                    status, payload = 404, b'{"error": {"message": "no such path"}}'
                writer.write(_response(status, payload))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            self.connections.discard(writer)
            writer.close()


async def serve(args: argparse.Namespace) -> None:
    if args.plan:
        from tests.functional.recovery_oracle import plan_for

        plan_for(args.plan.split(","))
    endpoint = LoopbackEndpoint(args.delay, args.fail_after, args.exit_after, args.oracle, args.hold_twins,
                                args.hold_role)
    server = await asyncio.start_server(endpoint.serve_connection, "127.0.0.1", args.port, backlog=512)
    port = endpoint.port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, endpoint.stop.set)
    loop.add_signal_handler(signal.SIGINT, endpoint.stop.set)
    print(f"listening on http://127.0.0.1:{port}/v1", flush=True)
    await endpoint.stop.wait()
    server.close()  # no new connections (they are refused from here on), and the open ones dropped
    for connection in list(endpoint.connections):
        connection.close()
    if args.log:
        Path(args.log).write_text(orjson.dumps({"answered": endpoint.answered, "units": endpoint.units}).decode())


@contextlib.contextmanager
def running_endpoint(delay_s: float, *extra: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Start the endpoint in its own process; yields (its base URL, the process); stopped on exit."""
    root = Path(__file__).resolve().parents[1]
    process = subprocess.Popen([sys.executable, "-m", "tests.loopback_endpoint", "--delay", str(delay_s), *extra],
                               cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"the loopback endpoint did not start: {line!r}")
        yield line.split()[-1], process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def endpoint_stats(url: str) -> tuple[int, Counter[str]]:
    """(chat requests answered, answers per distinct request body) of a running endpoint."""
    stats = raw_stats(url)
    return int(stats["answered"]), Counter(stats["bodies"])


def unit_requests(url: str) -> Counter[tuple[str, str]]:
    """Answers per (``X-MemProbe-Unit`` header, distinct request body) of a running endpoint: which
    unit asked what, for a role whose spec names several endpoints (only those send the header)."""
    answers: Counter[tuple[str, str]] = Counter()
    for key, count in raw_stats(url)["unit_bodies"].items():
        unit, _, body = key.partition(" ")
        answers[unit, body] = int(count)
    return answers


def exit_after(url: str, answers: int) -> None:
    """Make a running endpoint die after ``answers`` more chat answers."""
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{url}/exit-after", data=str(answers).encode()), timeout=10).read()


def raw_stats(url: str) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(f"{url}/stats", timeout=10) as answer:
        stats: dict[str, Any] = orjson.loads(answer.read())
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds before each chat answer")
    parser.add_argument("--fail-after", type=int, default=None)
    parser.add_argument("--exit-after", type=int, default=None)
    parser.add_argument("--log", default=None)
    parser.add_argument("--oracle", choices=["recovery", "paradigms"], default="recovery",
                        help="which scripted replies: protocol A's, or protocol B's (reader, memory writers) too")
    parser.add_argument("--plan", default=None, help="protocol A's dimensions, in the oracle's plan order")
    parser.add_argument("--hold-twins", type=float, default=0.0, help="seconds a new request waits for its twin")
    parser.add_argument("--hold-role", default=None, help="with --hold-twins: hold only this oracle role's requests")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args))
    sys.exit(0)


if __name__ == "__main__":
    main()
