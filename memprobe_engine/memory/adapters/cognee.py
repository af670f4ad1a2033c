"""``cognee``: the real cognee library behind the MemorySystem protocol, run in a virtual environment of its own.

cognee's pins (``openai`` 2.x, ``pandas`` 2.x, ``huggingface_hub`` 0.x, ``filelock`` < 4, …) are
older than the engine's, so it cannot be installed beside it. ``memprobe systems install cognee``
creates ``.venv-cognee`` (``MEMPROBE_COGNEE_VENV`` overrides the place) with the exact pin
:data:`COGNEE_PIN`; this adapter starts :mod:`~memprobe_engine.memory.adapters.cognee_worker` with
that venv's interpreter, one process per user / episode (a fresh store and a fresh cognee), and
speaks JSON lines with it over stdin/stdout.

Everything else is the other adapters' machinery (:class:`LibraryAdapter`): cognee's LLM and
embedding calls go to the recording proxy with this system's token, so they are recorded with
system ``cognee``, cached and never repeated on resume; its stores (SQLite, LanceDB, the Ladybug
graph) live in ``RECORDING/stores/cognee/<user>/``, with the worker's log beside them; after every
ingest the graph is dumped and its changes recorded as memory ops. The simulated time and a seed
drawn from the unit's seeded source travel with each request, and the worker pins cognee's clock
and ``uuid4`` to them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any, ClassVar

from memprobe_engine.errors import ConfigError, MemProbeError
from memprobe_engine.memory.adapters.base import LibraryAdapter, conversation
from memprobe_engine.memory.base import MemoryServices, Observation

#: The cognee release the adapter is written against (current on PyPI when it was written).
COGNEE_PIN = "cognee==1.6.5"
EMBEDDING_DIMS = 384
#: Cap on generated tokens per cognee call (its default, 16384, exceeds the embedded model's context).
MAX_TOKENS = 1500
_WORKER = Path(__file__).with_name("cognee_worker.py")
_REPO_ROOT = Path(__file__).resolve().parents[3]


class WorkerError(MemProbeError):
    """The cognee worker failed a request or died; the message names its log file."""


def cognee_venv() -> Path:
    """Where cognee's own virtual environment lives: ``MEMPROBE_COGNEE_VENV`` or ``<checkout>/.venv-cognee``."""
    configured = os.environ.get("MEMPROBE_COGNEE_VENV")
    return Path(configured).expanduser() if configured else _REPO_ROOT / ".venv-cognee"


def cognee_python(venv: Path | None = None) -> Path:
    return (venv or cognee_venv()) / "bin" / "python"


def installed_cognee_version(venv: Path | None = None) -> str | None:
    """cognee's version in its venv, read from the installed metadata folder (no interpreter started)."""
    root = venv or cognee_venv()
    if not cognee_python(root).exists():
        return None
    for info in sorted(root.glob("lib/python3*/site-packages/cognee-*.dist-info")):
        return info.name.removeprefix("cognee-").removesuffix(".dist-info")
    return None


def install_cognee(venv: Path | None = None, *, python: str = sys.executable) -> tuple[str, float]:
    """Create the venv (if needed) and install :data:`COGNEE_PIN` into it; returns (version, seconds).
    Never touches the engine's own environment."""
    root = venv or cognee_venv()
    started = time.monotonic()
    if not cognee_python(root).exists():
        subprocess.run([python, "-m", "venv", str(root)], check=True)
    pip = [str(cognee_python(root)), "-m", "pip"]
    subprocess.run([*pip, "install", "--quiet", "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "install", "--quiet", COGNEE_PIN], check=True)
    version = installed_cognee_version(root)
    if version is None:
        raise ConfigError(f"pip finished but no cognee is installed in {root}; see pip's output above")
    return version, time.monotonic() - started


class Cognee(LibraryAdapter):
    """cognee's add + cognify (chunks, LLM graph extraction, summaries) and its triplet search."""

    name: ClassVar[str] = "cognee"
    description: ClassVar[str] = ("cognee (the published library, in its own venv): add + cognify builds a knowledge "
                                  "graph of chunks, entities and summaries; search is its graph triplet retrieval.")
    distribution: ClassVar[str] = "cognee"
    extra: ClassVar[str] = "cognee"
    content_field: ClassVar[str] = "content"

    _process: subprocess.Popen[str] | None = None
    _log: IO[bytes] | None = None

    @classmethod
    def installed_version(cls) -> str | None:
        return installed_cognee_version()

    @classmethod
    def unavailable_reason(cls) -> str:
        return (f"cognee runs in its own virtual environment, not found at {cognee_venv()}: run "
                f"`memprobe systems install cognee` (or make install-cognee) to create it with {COGNEE_PIN}")

    def __init__(self, services: MemoryServices) -> None:
        if self.installed_version() is None:
            raise ConfigError(f"memory system 'cognee' cannot run: {self.unavailable_reason()}")
        super().__init__(services)
        self._warnings: list[str] = []

    async def _flush(self) -> None:
        """The base's ingest, then what cognify reported failing, recorded here on the engine's side
        (inside the current span) as recoverable errors."""
        self._warnings = []
        await super()._flush()
        for message in self._warnings:
            self.library_error(f"cognify: {message}")

    # -- hooks, on the library thread ------------------------------------------------------------

    def _lib_reset(self, store_dir: Path) -> None:
        self._stop()
        env = {**os.environ, "MEMPROBE_COGNEE_STORE": str(store_dir), "MEMPROBE_COGNEE_BASE_URL": self.base_url,
               "MEMPROBE_COGNEE_API_KEY": self.api_key, "MEMPROBE_COGNEE_DIMS": str(EMBEDDING_DIMS),
               "MEMPROBE_COGNEE_MAX_TOKENS": str(MAX_TOKENS), "MEMPROBE_COGNEE_NOW": self._now(),
               "PYTHONUNBUFFERED": "1"}
        for name in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
            env.pop(name, None)  # the worker runs cognee's venv, not ours
        self._log = (store_dir / "worker.log").open("ab")
        self._process = subprocess.Popen([str(cognee_python()), "-P", str(_WORKER)], cwd=store_dir, env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                         text=True, encoding="utf-8", bufsize=1)
        self._read()  # the worker's "ready" line: cognee imported and configured
        self._request({"op": "reset"})

    def _lib_ingest(self, batch: list[Observation]) -> None:
        text = "\n".join(f"{m['role']}: {m['content']}" for m in conversation(batch))
        outcome = self._request({"op": "ingest", "text": text})
        self._warnings.extend(str(m) for m in (outcome.get("errors", []) if isinstance(outcome, dict) else []))

    def _lib_search(self, query: str, k: int) -> list[tuple[str, dict[str, Any], float | None]]:
        hits = self._request({"op": "search", "query": query, "k": k})
        return [(str(key), dict(item), score) for key, item, score in hits]

    def _lib_dump(self) -> dict[str, dict[str, Any]]:
        return dict(self._request({"op": "dump"}))

    # -- the worker ------------------------------------------------------------------------------

    def _now(self) -> str:
        return self.services.clock.now().replace(tzinfo=None).isoformat()

    def _request(self, request: dict[str, Any]) -> Any:
        """Send one request with the simulated time and a seed from the unit's source; its result."""
        process = self._process
        if process is None or process.stdin is None or process.poll() is not None:
            raise WorkerError(f"the cognee worker is not running; see {self.store_dir / 'worker.log'}")
        request = {**request, "now": self._now(), "seed": self.services.rng.getrandbits(63)}
        try:
            process.stdin.write(json.dumps(request, ensure_ascii=False) + "\n")
            process.stdin.flush()
        except BrokenPipeError as err:
            raise WorkerError(f"the cognee worker exited; see {self.store_dir / 'worker.log'}") from err
        return self._read()

    def _read(self) -> Any:
        assert self._process is not None and self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            code = self._process.wait()
            raise WorkerError(f"the cognee worker exited (code {code}) before answering; its log: "
                              f"{self.store_dir / 'worker.log'}{_log_tail(self.store_dir / 'worker.log')}")
        answer = json.loads(line)
        if not answer.get("ok"):
            raise WorkerError(f"cognee: {answer.get('error')}: {answer.get('message')} "
                              f"(log: {self.store_dir / 'worker.log'})")
        return answer.get("result")

    def _stop(self) -> None:
        """Close the worker's input (it exits at end of input) and wait for it."""
        process, self._process = self._process, None
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


def _log_tail(path: Path, lines: int = 8) -> str:
    try:
        tail = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return ("\n  " + "\n  ".join(tail)) if tail else ""
