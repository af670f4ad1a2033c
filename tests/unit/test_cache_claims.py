"""Claims in the persistent response cache: processes sharing the cache file (shards of one run on a
shared home) never send a request another has answered or has on its way; a crashed holder never
blocks the others. Two ``ResponseCache`` handles on one folder stand for two processes (each names
its own claims); a real second process checks the dead-owner takeover."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from memprobe_engine.errors import ConfigError
from memprobe_engine.llm import cache as cache_module
from memprobe_engine.llm.cache import ResponseCache, file_system_of
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.spec import ModelSpec
from memprobe_engine.llm.types import ChatBackend, ChatResult
from tests.doubles import read_events, temp_recording
from tests.unit.test_llm_client import SlowBackend, config, user

ROOT = Path(__file__).resolve().parents[2]
ENDPOINT = "http://127.0.0.1:1/v1"


def _serving(backend: ChatBackend) -> Callable[[ModelSpec], ChatBackend]:
    return lambda spec: backend


async def _pending(task: asyncio.Task[ChatResult | None], seconds: float = 0.3) -> bool:
    await asyncio.sleep(seconds)
    return not task.done()


async def test_a_request_claimed_elsewhere_is_waited_for_and_its_answer_used(tmp_path: Path) -> None:
    first, other = ResponseCache(tmp_path), ResponseCache(tmp_path)
    assert await first.acquire("k", ENDPOINT) is None  # first: send it
    waiting = asyncio.create_task(other.acquire("k", ENDPOINT))
    assert await _pending(waiting)
    first.put("k", ChatResult(text="the answer"), ENDPOINT)
    assert await asyncio.wait_for(waiting, 5) == ChatResult(text="the answer")
    assert await other.acquire("k", ENDPOINT) == ChatResult(text="the answer")  # answered: never claimed again
    assert first._db.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0
    first.close()
    other.close()


async def test_a_released_claim_passes_to_the_next_waiting_process(tmp_path: Path) -> None:
    first, other = ResponseCache(tmp_path), ResponseCache(tmp_path)
    assert await first.acquire("k") is None
    waiting = asyncio.create_task(other.acquire("k"))
    assert await _pending(waiting)
    first.release("k")  # its call failed
    assert await asyncio.wait_for(waiting, 5) is None  # the waiter sends it now
    assert first._db.execute("SELECT owner FROM claims").fetchall() == [(other.owner,)]
    first.close()
    other.close()


async def test_a_stale_claim_is_taken_over_and_a_live_one_kept_fresh(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "HEARTBEAT_S", 0.05)
    monkeypatch.setattr(cache_module, "STALE_AFTER_S", 0.4)
    first, other = ResponseCache(tmp_path), ResponseCache(tmp_path)
    assert await first.acquire("k") is None
    waiting = asyncio.create_task(other.acquire("k"))
    assert await _pending(waiting, 1.0)  # past the stale limit: the holder's heartbeat keeps its claim
    first.put("k", ChatResult(text="kept"))
    assert (await asyncio.wait_for(waiting, 5)) == ChatResult(text="kept")
    # A holder on another host that stopped refreshing its claim (it crashed there): taken over.
    first._db.execute("INSERT INTO claims (hash, owner, host, pid, claimed) VALUES ('j', 'node9:1:x', 'node9', 1, 0)")
    assert await asyncio.wait_for(other.acquire("j"), 5) is None
    first.close()
    other.close()


async def test_a_claim_whose_process_is_gone_is_taken_over_at_once(tmp_path: Path) -> None:
    code = ("import asyncio, os, sys; from pathlib import Path; from memprobe_engine.llm.cache import ResponseCache;"
            "c = ResponseCache(Path(sys.argv[1])); assert asyncio.run(c.acquire('k')) is None; os._exit(0)")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, check=True, timeout=60)
    other = ResponseCache(tmp_path)
    assert other._db.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 1  # left behind by the crash
    assert await asyncio.wait_for(other.acquire("k"), 2) is None  # well within the stale limit
    other.close()


async def test_two_processes_sharing_the_cache_send_one_request(tmp_path: Path) -> None:
    """Two clients on two handles of one cache folder (two shards) ask one request at once: one is sent,
    the other waits for it and is recorded as a cache hit with the same answer. On two folders, both send."""
    backends = [SlowBackend(lambda request: "one answer"), SlowBackend(lambda request: "another answer")]
    with temp_recording(tmp_path / "a") as one, temp_recording(tmp_path / "b") as two:
        clients = [ChatClient(config(), recorder, ResponseCache(tmp_path / "cache"), backend_factory=_serving(b))
                   for recorder, b in zip((one, two), backends)]
        outcomes = await asyncio.gather(*(client.chat("agent", user("same question")) for client in clients))
    assert sum(len(b.requests) for b in backends) == 1
    assert len({o.text for o in outcomes}) == 1
    assert sorted(o.cache_hit for o in outcomes) == [False, True]
    hits = [e["cache_hit"] for folder in ("a", "b") for e in read_events(tmp_path / folder)]
    assert sorted(bool(h) for h in hits) == [False, True]
    # A cache folder each shares nothing: both send it.
    backends = [SlowBackend(lambda request: "answer"), SlowBackend(lambda request: "answer")]
    clients = [ChatClient(config(), cache=ResponseCache(tmp_path / name), backend_factory=_serving(b))
               for name, b in zip(("x", "y"), backends)]
    await asyncio.gather(*(client.chat("agent", user("another question")) for client in clients))
    assert [len(b.requests) for b in backends] == [1, 1]


def test_the_file_system_is_read_from_the_mount_table(tmp_path: Path) -> None:
    table = tmp_path / "mountinfo"
    table.write_text("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
                     "40 22 0:50 / /home rw - nfs4 server:/home rw\n"
                     "41 40 0:51 / /home/x\\040y rw - lustre mds:/fs rw\n")
    assert file_system_of(Path("/home/alice/.cache"), table) == "nfs4"
    assert file_system_of(Path("/homework"), table) == "ext4"
    assert file_system_of(Path("/home/x y/z"), table) == "lustre"
    assert file_system_of(Path("/"), tmp_path / "absent") == ""


def test_on_a_network_file_system_the_cache_leaves_wal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local = ResponseCache(tmp_path)
    assert local._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    monkeypatch.setattr(cache_module, "file_system_of", lambda path: "nfs4")
    with pytest.raises(ConfigError, match="network file system.*MEMPROBE_CACHE_DIR"):
        ResponseCache(tmp_path)  # the local handle still holds it in WAL
    local.close()
    shared = ResponseCache(tmp_path)
    assert shared._db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    shared.close()
