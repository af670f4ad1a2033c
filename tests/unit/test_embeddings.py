"""Embeddings: top-k retrieval, the per-text vector cache, and the EmbeddingBatch event per call.

Uses the real packaged all-MiniLM-L6-v2 (small, local, offline) for the recorded round trip, and a
counting fake backend where the test is about what reaches the model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.header import new_header
from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.writer import open_writer
from memprobe_engine.llm.embeddings import (
    MINILM_NAME,
    Embedder,
    EmbeddingSpec,
    FloatMatrix,
    SentenceTransformerBackend,
    cosine_top_k,
    parse_embedding_spec,
)


class CountingBackend:
    """Deterministic 4-d vectors from the text; remembers every batch it was asked for."""

    name = "fake"
    model = "fake-4d"
    model_id = "fake:fake-4d"

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    async def embed_batch(self, texts: list[str]) -> FloatMatrix:
        self.batches.append(list(texts))
        return np.asarray([[len(t), t.count("a") + 1, 1.0, 2.0] for t in texts], dtype=np.float32)

    async def aclose(self) -> None:
        return None


def test_cosine_top_k_orders_by_similarity_and_breaks_ties_by_index() -> None:
    matrix = np.asarray([[1, 0], [0, 1], [1, 1], [2, 0], [-1, 0]], dtype=np.float32)
    result = cosine_top_k(np.asarray([3.0, 0.0]), matrix, 3)
    assert [index for index, _ in result] == [0, 3, 2]  # rows 0 and 3 tie at 1.0: lower index first
    assert result[0][1] == pytest.approx(1.0)
    assert result[2][1] == pytest.approx(np.sqrt(0.5))
    last_index, last_score = cosine_top_k([1.0, 0.0], matrix, 10)[-1]
    assert last_index == 4 and last_score == pytest.approx(-1.0)
    assert cosine_top_k([1.0, 0.0], matrix, 0) == []
    assert cosine_top_k([1.0, 0.0], np.zeros((0, 2), dtype=np.float32), 3) == []
    with pytest.raises(ValueError):
        cosine_top_k([1.0, 0.0, 0.0], matrix, 1)


def test_parse_embedding_spec_forms_and_errors(tmp_path: Path) -> None:
    assert parse_embedding_spec("st:minilm") == EmbeddingSpec(kind="st", model=MINILM_NAME)
    assert parse_embedding_spec("st:all-MiniLM-L6-v2").model == MINILM_NAME
    assert parse_embedding_spec(f"st:{tmp_path}").model == str(tmp_path.resolve())
    spec = parse_embedding_spec("openai:text-embedding-3-small@http://127.0.0.1:8000/v1/")
    assert (spec.kind, spec.model, spec.base_url) == ("openai", "text-embedding-3-small", "http://127.0.0.1:8000/v1")
    assert spec.spec_string() == "openai:text-embedding-3-small@http://127.0.0.1:8000/v1"
    assert parse_embedding_spec("openai:text-embedding-3-small").base_url is None
    for bad in ("", "minilm", "st:", "st:bge-large", "openai:", "openai:m@ftp://x", "hf:minilm"):
        with pytest.raises(ConfigError, match="Valid forms"):
            parse_embedding_spec(bad)


async def test_cache_round_trip_embeds_each_text_once(tmp_path: Path) -> None:
    backend = CountingBackend()
    embedder = Embedder(backend, cache_path=tmp_path / "cache.sqlite", batch_size=2)
    first = await embedder.embed(["a", "bb", "a", "ccc"])
    assert first.shape == (4, 4) and first.dtype == np.float32
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0)
    assert np.array_equal(first[0], first[2])
    assert backend.batches == [["a", "bb"], ["ccc"]]  # duplicate embedded once, batches of 2
    await embedder.aclose()

    again = Embedder(backend, cache_path=tmp_path / "cache.sqlite")  # a new process would see the same file
    second = await again.embed(["ccc", "a", "dddd"])
    assert backend.batches[-1] == ["dddd"]
    assert np.array_equal(second[0], first[3]) and np.array_equal(second[1], first[0])
    await again.aclose()


async def test_vectors_already_seen_skip_the_cache_query_and_count_as_hits(tmp_path: Path) -> None:
    backend = CountingBackend()
    writer = open_writer(tmp_path / "rec", new_header("r", "test", {}))
    embedder = Embedder(backend, recorder=Recorder(writer), cache_path=tmp_path / "cache.sqlite")
    assert embedder.cache is not None
    queried: list[list[str]] = []
    lookup = embedder.cache.get_many
    embedder.cache.get_many = lambda keys: queried.append(list(keys)) or lookup(keys)  # type: ignore[method-assign]
    first = await embedder.embed(["a", "bb"])
    second = await embedder.embed(["bb", "a", "ccc"])
    assert len(queried) == 2 and len(queried[1]) == 1  # only "ccc" was looked up in SQLite
    assert np.array_equal(second[0], first[1]) and np.array_equal(second[1], first[0])
    assert backend.batches == [["a", "bb"], ["ccc"]]
    await embedder.aclose()
    writer.close()
    with open_recording(tmp_path / "rec") as reader:
        assert [e.cache_hits for e in reader.iter_events(kinds=["embedding"])] == [0, 2]  # as the cache alone gave

    uncached = Embedder(backend, use_cache=False)
    await uncached.embed(["a"])
    await uncached.embed(["a"])
    assert backend.batches[-2:] == [["a"], ["a"]]  # without a cache nothing is remembered either


async def test_minilm_embeddings_are_recorded_once_per_call(tmp_path: Path) -> None:
    writer = open_writer(tmp_path / "rec", new_header("r", "test", {}))
    embedder = Embedder(SentenceTransformerBackend(), recorder=Recorder(writer),
                        cache_path=tmp_path / "cache.sqlite")
    texts = ["The user is allergic to peanuts.", "The user prefers window seats.", "Peanut allergy noted."]
    vectors = await embedder.embed(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    best = cosine_top_k(vectors[0], vectors[1:], 1)
    assert best[0][0] == 1  # the allergy sentences are nearer to each other than to the seat preference
    cached = await embedder.embed(texts[:2])
    assert np.allclose(cached, vectors[:2])
    await embedder.aclose()
    writer.close()

    with open_recording(tmp_path / "rec") as reader:
        events = list(reader.iter_events(kinds=["embedding"]))
        assert [(e.n_texts, e.dim, e.cache_hits) for e in events] == [(3, 384, 0), (2, 384, 2)]
        assert events[0].backend == "sentence-transformers" and events[0].model == MINILM_NAME
        assert events[0].error is None and events[0].latency_s > 0
        assert reader.payload(events[0].texts_ref) == texts
