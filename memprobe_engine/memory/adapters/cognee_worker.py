"""The cognee side of the ``cognee`` adapter: a worker process run by cognee's own virtual environment.

cognee cannot share the engine's environment (its pins are older than the project's), so the
adapter (:mod:`memprobe_engine.memory.adapters.cognee`) starts this file with the interpreter of a
separate venv (``memprobe systems install cognee``) and talks to it over stdin/stdout, one JSON
object per line. This module therefore imports only the standard library and cognee — never
``memprobe_engine``.

Requests ``{"op": …}`` and their answers (``{"ok": true, "result": …}`` or ``{"ok": false,
"error": TYPE, "message": …}``):

- ``reset`` — an empty store (cognee's own prune of data and system state);
- ``ingest {text, now, seed}`` — ``cognee.add(text)`` then ``cognee.cognify()``: chunking, graph
  extraction by the LLM, summaries, embeddings, all cognee's own; ``{"errors": […]}`` lists what
  cognify reported failed (the store keeps what it wrote);
- ``search {query, k, now, seed}`` — the triplet search that cognee's graph-completion retriever
  feeds its answer model (``brute_force_triplet_search``), as ``[[item_id, item, score], …]``;
- ``dump`` — every graph node and edge with its native properties (embeddings left out);
- ``footprint`` — item count and content characters of that dump.

Configuration comes from the environment the adapter sets (``MEMPROBE_COGNEE_*``): LLM and
embeddings point at the engine's recording proxy, every store (SQLite, LanceDB, the Ladybug graph,
caches, logs) lives in the store folder, telemetry and the first-run connection probe are off.
While a request runs, ``datetime`` / ``uuid4`` in cognee's modules answer the simulated time and a
source seeded by the request, so what reaches prompts is stable across runs.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import random
import sys
import traceback
import uuid
from pathlib import Path
from types import ModuleType
from typing import IO, Any, ClassVar

_SKIP_PROPERTIES = {"embedding", "vector", "embeddings"}
#: The model name cognee asks for: the proxy answers it with the engine's ``memory_writer`` role.
LLM_MODEL = "openai/memory_writer"


def configure(store: Path, base_url: str, api_key: str, dims: int, max_tokens: int) -> None:
    """Everything cognee reads from the environment at import, pointed at the proxy and the store."""
    home = store / "home"
    home.mkdir(parents=True, exist_ok=True)
    env_file = store / "cognee.env"
    env_file.touch()
    tiktoken_dir = _tiktoken_dir()
    if tiktoken_dir is not None:
        os.environ["TIKTOKEN_CACHE_DIR"] = tiktoken_dir
    os.environ.update({
        "COGNEE_ENV_FILE": str(env_file),  # an empty .env of our own: no stray .env upward wins
        "HOME": str(home),
        "DATA_ROOT_DIRECTORY": str(store / "data"), "SYSTEM_ROOT_DIRECTORY": str(store / "system"),
        "CACHE_ROOT_DIRECTORY": str(store / "cache"), "COGNEE_LOGS_DIR": str(store / "logs"),
        "COGNEE_REPOS_DIR": str(store / "repos"),
        "LLM_PROVIDER": "openai", "LLM_MODEL": LLM_MODEL, "LLM_ENDPOINT": base_url,
        "LLM_API_KEY": api_key, "LLM_TEMPERATURE": "0.0", "LLM_MAX_COMPLETION_TOKENS": str(max_tokens),
        "EMBEDDING_PROVIDER": "openai", "EMBEDDING_MODEL": "openai/embeddings", "EMBEDDING_ENDPOINT": base_url,
        "EMBEDDING_API_KEY": api_key, "EMBEDDING_DIMENSIONS": str(dims),
        "ENABLE_BACKEND_ACCESS_CONTROL": "false",  # one store per process: the adapter isolates users by folder
        "COGNEE_SKIP_CONNECTION_TEST": "true", "TELEMETRY_DISABLED": "1", "ENV": "local",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1",
    })


class _AnyDatetime(type):
    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, dt.datetime)


class _SimDatetime(dt.datetime, metaclass=_AnyDatetime):
    """``datetime`` inside cognee's modules: ``now``/``utcnow``/``today`` are the request's time."""

    current: ClassVar[dt.datetime | None] = None

    @classmethod
    def now(cls, tz: dt.tzinfo | None = None) -> _SimDatetime:
        base = cls.current or dt.datetime.now(dt.timezone.utc)
        base = base.astimezone(tz) if tz is not None else base.replace(tzinfo=None)
        return cls.combine(base.date(), base.timetz())

    @classmethod
    def utcnow(cls) -> _SimDatetime:
        return cls.now()

    @classmethod
    def today(cls) -> _SimDatetime:
        return cls.now()


_RNG = random.Random(0)


def _seeded_uuid4() -> uuid.UUID:
    return uuid.UUID(int=_RNG.getrandbits(128), version=4)


class _SeededUUID(ModuleType):
    def __init__(self) -> None:
        super().__init__("uuid")
        self.uuid4 = _seeded_uuid4

    def __getattr__(self, name: str) -> Any:
        return getattr(uuid, name)


def pin_modules() -> int:
    """Point the ``datetime`` / ``uuid`` names of every loaded cognee module at the pinned ones;
    returns how many names were replaced. Called after each request too: cognee imports lazily."""
    sim_module = ModuleType("datetime")
    sim_module.__dict__.update({k: v for k, v in dt.__dict__.items() if not k.startswith("__")})
    sim_module.datetime = _SimDatetime  # type: ignore[attr-defined]
    seeded = _SeededUUID()
    replaced = 0
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "cognee" or name.startswith("cognee.")):
            continue
        for attr, value in list(vars(module).items()):
            new: Any = None
            if value is dt.datetime:
                new = _SimDatetime
            elif value is dt:
                new = sim_module
            elif value is uuid:
                new = seeded
            elif value is uuid.uuid4:
                new = _seeded_uuid4
            if new is not None:
                setattr(module, attr, new)
                replaced += 1
    return replaced


def _json(value: object) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items() if str(k) not in _SKIP_PROPERTIES}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _content(props: dict[str, Any]) -> str:
    """A node's text: a chunk's or summary's ``text``, else ``name: description``."""
    if isinstance(props.get("text"), str) and props["text"]:
        return str(props["text"])
    name, description = props.get("name") or "", props.get("description") or ""
    return f"{name}: {description}".strip(": ") if (name or description) else str(props.get("type", ""))


def edge_id(source: str, relation: str, target: str) -> str:
    return f"{source}|{relation}|{target}"


class Worker:
    """One cognee store; each method answers one request."""

    async def reset(self) -> None:
        import cognee

        await cognee.prune.prune_data()
        await cognee.prune.prune_system(metadata=True)

    async def ingest(self, text: str) -> dict[str, Any]:
        import cognee

        await cognee.add(text)
        # A session the library fails to process (e.g. a small model's graph JSON that never
        # validates, after cognee's own retries) is cognee's outcome to record, not the end of the run:
        # what it stored stays, and the adapter records the failure as a recoverable error.
        try:
            runs = await cognee.cognify(raise_on_error=False)
        except Exception as err:
            return {"characters": len(text), "errors": [f"{type(err).__name__}: {err}"[:2000]]}
        errors = [f"{getattr(run, 'status', '')}: {getattr(run, 'payload', '')}"[:2000]
                  for run in (runs.values() if isinstance(runs, dict) else [])
                  if "error" in str(getattr(run, "status", "")).lower()]
        return {"characters": len(text), "errors": errors}

    async def dump(self) -> dict[str, dict[str, Any]]:
        from cognee.infrastructure.databases.graph import get_graph_engine

        engine = await get_graph_engine()
        nodes, edges = await engine.get_graph_data()
        items: dict[str, dict[str, Any]] = {}
        names: dict[str, str] = {}
        for node_id, props in nodes:
            fields = _json(dict(props))
            fields["id"] = str(node_id)
            fields["kind"] = "node"
            fields["content"] = _content(fields)
            items[str(node_id)] = fields
            names[str(node_id)] = str(fields.get("name") or fields["content"][:80])
        for source, target, relation, props in edges:
            key = edge_id(str(source), str(relation), str(target))
            fields = _json(dict(props or {}))
            # cognee writes the edge's sentence in ``edge_text``; without one, the endpoints' names say it
            text = fields.get("edge_text") or f"{names.get(str(source), source)} {relation} {names.get(str(target), target)}"
            fields.update(kind="edge", source=str(source), target=str(target), relationship_name=str(relation),
                          content=str(text))
            items[key] = fields
        return dict(sorted(items.items(), key=lambda kv: (kv[1]["kind"], str(kv[1].get("created_at", "")), kv[0])))

    async def search(self, query: str, k: int) -> list[list[Any]]:
        from cognee.modules.retrieval.utils.brute_force_triplet_search import brute_force_triplet_search

        found = await brute_force_triplet_search(query=query, top_k=k)
        items = await self.dump()
        hits: list[list[Any]] = []
        for edge in found:
            attributes = dict(getattr(edge, "attributes", {}) or {})
            relation = str(attributes.get("relationship_name") or attributes.get("relationship_type") or "")
            key = edge_id(str(edge.node1.id), relation, str(edge.node2.id))
            distance = attributes.get("vector_distance")
            item = items.get(key) or {"kind": "edge", "content": f"{edge.node1.id} {relation} {edge.node2.id}",
                                      "attributes": _json(attributes)}
            hits.append([key, item, -float(distance) if isinstance(distance, (int, float)) else None])
        return hits

    async def footprint(self) -> dict[str, int]:
        items = await self.dump()
        return {"items": len(items), "chars": sum(len(str(item.get("content", ""))) for item in items.values())}


async def handle(worker: Worker, request: dict[str, Any]) -> Any:
    op = request.get("op")
    if "now" in request:
        _SimDatetime.current = dt.datetime.fromisoformat(str(request["now"])).replace(tzinfo=dt.timezone.utc)
    if "seed" in request:
        _RNG.seed(int(request["seed"]))
    pin_modules()
    if op == "reset":
        return await worker.reset()
    if op == "ingest":
        return await worker.ingest(str(request["text"]))
    if op == "search":
        return await worker.search(str(request["query"]), int(request["k"]))
    if op == "dump":
        return await worker.dump()
    if op == "footprint":
        return await worker.footprint()
    raise ValueError(f"unknown op {op!r}; known: reset, ingest, search, dump, footprint")


def _tiktoken_dir() -> str | None:
    """litellm ships tiktoken's cl100k_base file; pointing tiktoken at it keeps token counting offline."""
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
    return str(folder) if folder.is_dir() else None


async def serve(reply: IO[str]) -> None:
    worker = Worker()
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return  # the engine closed the pipe (or died): nothing is left to answer
        try:
            request = json.loads(line)
            answer: dict[str, Any] = {"ok": True, "result": await handle(worker, request)}
        except Exception as err:  # every failure goes back to the engine, which records it
            traceback.print_exc(file=sys.stderr)
            answer = {"ok": False, "error": type(err).__name__, "message": str(err)[:2000]}
        reply.write(json.dumps(answer, ensure_ascii=False) + "\n")
        reply.flush()


def _declare_schema_support(litellm: Any, max_tokens: int) -> None:
    """Tell litellm that the proxy's model enforces ``response_format`` JSON schemas (it does, on every
    backend). cognee asks litellm's capability table; for a model it does not know, cognee falls
    back to plain JSON mode with the schema pasted into the prompt, which a small model tends to
    echo back instead of filling in."""
    entry = {"litellm_provider": "openai", "mode": "chat", "supports_response_schema": True,
             "max_input_tokens": 16384, "max_output_tokens": max_tokens,
             "input_cost_per_token": 0.0, "output_cost_per_token": 0.0}
    litellm.register_model({LLM_MODEL: entry, LLM_MODEL.split("/", 1)[1]: entry})


def _no_wall_clock_retry_floor() -> None:
    """cognee retries a structured-output call until at least 2 attempts *and* 240 s have passed.
    Behind the proxy's response cache an identical request gets the identical answer, so the time
    floor only waits; it is set to 0 s in place (the shared stop condition the decorators hold), the
    attempt floor stays. cognee's own repair loop — re-asking with the validation error — is untouched."""
    from cognee.infrastructure.llm import retry_config
    from tenacity.stop import stop_after_delay

    for condition in getattr(retry_config.llm_retry_stop_condition, "stops", ()):
        if isinstance(condition, stop_after_delay):
            condition.max_delay = 0


def _exit_with_parent() -> None:
    """End this process when the engine that started it is gone (even by SIGKILL): a worker blocked
    in a long cognify would otherwise keep retrying a proxy that no longer exists."""
    import threading
    import time

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(2)
        os._exit(0)
    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main() -> None:
    _exit_with_parent()
    # This file sits beside the adapter module ``cognee.py``: the script's folder must not shadow the library.
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [entry for entry in sys.path if entry and str(Path(entry).resolve()) != here]
    store = Path(os.environ["MEMPROBE_COGNEE_STORE"])
    configure(store, os.environ["MEMPROBE_COGNEE_BASE_URL"], os.environ["MEMPROBE_COGNEE_API_KEY"],
              int(os.environ.get("MEMPROBE_COGNEE_DIMS", "384")), int(os.environ.get("MEMPROBE_COGNEE_MAX_TOKENS", "1500")))
    # The protocol owns stdout: cognee's logs and prints go to stderr (the adapter's log file).
    reply = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _SimDatetime.current = dt.datetime.fromisoformat(os.environ.get("MEMPROBE_COGNEE_NOW", "2025-01-01T00:00:00")) \
        .replace(tzinfo=dt.timezone.utc)
    from importlib import metadata

    import cognee
    import litellm

    # The proxy's embedding model has one size; litellm refuses the ``dimensions`` parameter for a
    # model name it does not know instead of leaving it out.
    litellm.drop_params = True
    _declare_schema_support(litellm, int(os.environ.get("MEMPROBE_COGNEE_MAX_TOKENS", "1500")))
    _no_wall_clock_retry_floor()

    pin_modules()
    reply.write(json.dumps({"ok": True, "result": {"ready": True, "cognee": metadata.version("cognee"),
                                                   "pid": os.getpid(), "module": cognee.__name__}}) + "\n")
    reply.flush()
    asyncio.run(serve(reply))


if __name__ == "__main__":
    main()
