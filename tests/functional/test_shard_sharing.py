"""Shards of one run share work through a shared response cache, and say what they could not share.

A small fixed-dialogue protocol-A job (one user × two systems, three dimensions, two of which reach
stage-0 attribution) runs as two shards started together against a loopback endpoint that counts the
requests it answers by body. The endpoint holds each stage-0 request until its twin arrives (or a
few seconds pass), so the two shards have that request in flight together whatever their start-up
times: a shard that sends a request another has on its way is seen sending it twice.

With one cache folder (a cluster's shared home) no request goes out twice and the merged recording
reports as the unsharded run does; with a cache folder each, ``memprobe merge`` and ``memprobe
report`` say how many requests went out twice: exactly what the endpoint counted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from contextlib import AbstractContextManager
from pathlib import Path

from memprobe_engine.events.llm import LLMCall
from memprobe_engine.events.reader import open_recording
from tests.loopback_endpoint import endpoint_stats, running_endpoint

ROOT = Path(__file__).resolve().parents[2]
DIMS = ["geographic_knowledge", "directness_preference", "writing_skill"]  # ok, task design, memory failure
#: Seconds the endpoint holds a stage-0 request for its twin: far above the shards' start-up skew.
HOLD_S = "8"


def memprobe(args: list[str], cache: Path, *, wait: bool = True) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMPROBE_CACHE_DIR": str(cache), "COLUMNS": "200"}
    process = subprocess.Popen([sys.executable, "-m", "memprobe_tui.main", *args], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if wait:
        finished(process)
    return process


def finished(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, f"exit {process.returncode}: {err[-3000:]}"
    return out


def run_args(record: Path, url: str, shard: str | None = None) -> list[str]:
    return ["run", "--record", str(record), "--sessions", "sessions/release-a", "--dialogues",
            "sessions/release-a/dialogues", "--users", "user_001", "--dims", ",".join(DIMS), "--systems",
            "nomem,longctx_full", "--model", f"default=openai:scripted@{url}", "--concurrency", "4",
            *(["--shard", shard] if shard else [])]


def sent(record: Path) -> Counter[str]:
    """Request hashes the recording's calls sent to the model (not answered from a cache)."""
    with open_recording(record) as reader:
        return Counter(e.request_hash for e in reader.iter_of(LLMCall) if not e.cache_hit and e.error is None)


def calls_by_role(record: Path) -> tuple[Counter[str], Counter[str]]:
    """(calls sent, calls answered from a cache) per role."""
    out: Counter[str] = Counter()
    hits: Counter[str] = Counter()
    with open_recording(record) as reader:
        for event in reader.iter_of(LLMCall):
            (hits if event.cache_hit else out)[event.role] += 1
    return out, hits


def tables(record: Path, folder: Path, cache: Path) -> dict[str, str]:
    finished(memprobe(["report", str(record), "--csv", str(folder)], cache, wait=False))
    return {path.name: path.read_text().replace(str(record), "<recording>") for path in sorted(folder.glob("*.csv"))}


def shards_together(record: Path, url: str, caches: list[Path]) -> Path:
    """Both shards started at once (each with its cache folder), then merged; the merged folder."""
    running = [memprobe(run_args(record, url, f"{i}/2"), cache, wait=False) for i, cache in enumerate(caches)]
    for process in running:
        finished(process)
    merged = record.with_name(record.name + "-merged")
    merge_out = finished(memprobe(["merge", str(merged), *(str(record.with_name(f"{record.name}.shard-{i}-of-2"))
                                                           for i in range(2))], caches[0], wait=False))
    (merged.parent / f"{merged.name}.merge-output").write_text(merge_out)
    return merged


def holding_endpoint() -> AbstractContextManager[tuple[str, subprocess.Popen[str]]]:
    """A fresh endpoint (it holds only a body it has not answered before) with the planned outcomes."""
    return running_endpoint(0.0, "--plan", ",".join(DIMS), "--hold-twins", HOLD_S, "--hold-role", "stage0")


def test_shards_on_one_cache_send_no_request_twice_and_report_as_one_run(tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    with holding_endpoint() as (url, _):
        memprobe(run_args(whole, url), tmp_path / "cache-whole")
        _, by_whole = endpoint_stats(url)
    with holding_endpoint() as (url, _):
        merged = shards_together(tmp_path / "rec", url, [tmp_path / "shared-cache"] * 2)
        _, by_shards = endpoint_stats(url)
    twice = {body: n for body, n in by_shards.items() if n > 1}
    assert not twice, f"{len(twice)} request(s) sent twice by shards sharing one cache"
    assert max(by_whole.values()) == 1 and by_shards == by_whole  # the shards sent what the whole run sent
    assert sent(merged) == sent(whole) and max(sent(merged).values()) == 1
    # The calls may differ only as cache hits (a shard asks the cache what the other unit of its process
    # would have taken from the stage-0 memo): the same calls sent per role.
    (out_whole, _), (out_merged, _) = calls_by_role(whole), calls_by_role(merged)
    assert out_merged == out_whole and out_whole["attribution_judge"] > 0
    assert tables(merged, tmp_path / "csv-merged", tmp_path / "c") == tables(whole, tmp_path / "csv-whole",
                                                                             tmp_path / "c")
    assert "more than one shard" not in (tmp_path / "rec-merged.merge-output").read_text()
    report = finished(memprobe(["report", str(merged)], tmp_path / "c", wait=False))
    assert "more than one shard" not in report


def test_shards_on_separate_caches_say_how_many_requests_they_sent_twice(tmp_path: Path) -> None:
    with holding_endpoint() as (url, _):
        merged = shards_together(tmp_path / "rec", url, [tmp_path / "cache-0", tmp_path / "cache-1"])
        _, bodies = endpoint_stats(url)
    twice = sum(1 for n in bodies.values() if n > 1)
    assert twice >= 2 and max(bodies.values()) == 2  # at least the two stage-0 requests, by both shards
    line = f"{twice} model request(s) were sent by more than one shard"
    assert line in (tmp_path / "rec-merged.merge-output").read_text()
    report = finished(memprobe(["report", str(merged)], tmp_path / "c", wait=False))
    assert report.count(line) == 1
    calls = report[report.index("tokens and cost per role"):]
    assert line in calls  # in the calls section
