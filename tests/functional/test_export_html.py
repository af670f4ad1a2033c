"""`memprobe export html`: one self-contained page — the shipped release run with one case opens in
headless Chromium with networking disabled and shows the why-chain and the store (read from the
DOM); recorded text holding markup (`<script>`, an `onerror` image) from a runner-written run is
escaped; the page references nothing outside itself; a bad --case is one line."""

from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.llm.types import ChatRequest
from tests.export_recordings import recovery_run
from tests.functional.recovery_oracle import RecoveryOracle, plan_for

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / "recordings" / "release-a-user_001-mem0"
CASE = "user_001:accomplishment_under_pressure_event"
HOSTILE = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"


def export(*args: str) -> str:
    result = CliRunner().invoke(app, ["export", "html", *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def dump_dom(page: Path) -> str:
    browser = os.environ.get("MEMPROBE_CHROMIUM") or next(
        filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if browser is None:
        pytest.skip("no Chromium on PATH (chromium, chromium-browser, google-chrome; or set MEMPROBE_CHROMIUM): "
                    "the page was checked as text only; .ci/run installs Debian's chromium")
    # Networking off: every host resolves nowhere and every request goes to a closed proxy port.
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9",
                           "--host-resolver-rules=MAP * ~NOTFOUND", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "<html" in done.stdout, done.stderr[-2000:]
    return done.stdout


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def self_contained(text: str) -> None:
    """Nothing outside the page, read as a browser parses it: no script, no element that loads
    anything, no attribute pointing elsewhere than the page itself, no CSS url()."""
    parser = _Tags()
    parser.feed(text)
    names = {tag for tag, _ in parser.tags}
    assert not names & {"script", "link", "img", "iframe", "object", "embed", "base", "form", "video", "audio"}, names
    for tag, attrs in parser.tags:
        for key, value in attrs:
            assert key not in ("src", "srcset", "action", "style") and not key.startswith("on"), (tag, key)
            assert key != "href" or (value or "").startswith("#"), (tag, value)
    assert "url(" not in text and "@import" not in text


def test_the_release_case_opens_offline_with_its_why_chain(tmp_path: Path) -> None:
    page = tmp_path / "case.html"
    said = export(str(RELEASE), "--case", CASE, "--out", str(page))
    assert f"wrote {page}" in said and "1 case(s)" in said
    text = page.read_text()
    self_contained(text)
    size = page.stat().st_size
    assert 30_000 < size < 400_000, size  # 93 KiB when written
    dom = dump_dom(page)
    for wanted in ("Table 2: main results", "Why-chains", "user_001 × mem0 · accomplishment_under_pressure_event",
                   "Hidden target", "Caught a hard fly ball in a delayed tournament game", "Transcript",
                   "Store at the fill", "Top-k retrieved", "Fill", "Judge", "Attribution", "episodic_memory"):
        assert wanted in dom, wanted
    # the store's note says the release holds only the final store; the retrieved items are marked in it
    assert "only each user's final store" in dom and "· retrieved" in dom
    assert dom.count("<tr class=\"added\">") + dom.count("<tr class=\"same\">") > 10


def test_recorded_markup_is_escaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))

    class Hostile(RecoveryOracle):
        def answer(self, request: ChatRequest) -> tuple[str, str]:
            role, text = super().answer(request)
            if role == "slot_filler":
                return role, orjson.dumps({"reason": HOSTILE, "label": HOSTILE}).decode()
            if role == "simulator" and text.startswith("{"):
                said = orjson.loads(text)
                return role, orjson.dumps({**said, "text": said["text"] + " " + HOSTILE}).decode()
            return role, text

    from memprobe_engine.recovery.inputs import load_user

    dims = [e.dimension for e in load_user(ROOT / "sessions" / "users" / "sim_01").bank.entries][:1]
    plan_for(dims)
    rec = recovery_run(tmp_path / "rec", dims, ["longctx_full"], oracle=Hostile())
    page = tmp_path / "hostile.html"
    export(str(rec), "--case", f"sim_01:{dims[0]}", "--out", str(page))
    text = page.read_text()
    self_contained(text)
    assert text.count("&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;") >= 3  # fill, reason, turns
    dom = dump_dom(page)
    assert "<title>MemProbe · " in dom and "pwned</title>" not in dom
    assert "<img" not in dom.lower() and "&lt;script&gt;" in dom


def test_protocol_b_and_bad_cases(tmp_path: Path) -> None:
    rec = ROOT / "recordings" / "sample-paradigms-quick"
    export(str(rec), "--case", "PILOT-01A:amem", "--out", str(tmp_path / "b.html"))
    text = (tmp_path / "b.html").read_text()
    self_contained(text)
    assert "PILOT-01A × amem" in text and text.count("<h4>probe ") == 4 and "The reader saw" in text
    assert "Table 1: overall accuracy" in text
    for bad in ("user_001:nope", "user_001", "a:b:c:d"):
        result = CliRunner().invoke(app, ["export", "html", str(RELEASE), "--case", bad])
        assert result.exit_code != 0 and f"--case {bad}: the recording has no such case" in str(result.exception)
    done = subprocess.run([os.sys.executable, "-m", "memprobe_tui.main", "export", "html", str(RELEASE), "--case", "x:y",
                           "--out", str(tmp_path / "x.html")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.html").exists()


def test_store_items_are_numbered_as_the_tui_numbers_them(tmp_path: Path) -> None:
    """longctx_full stores each task as ``[Task 0] …`` (counted from 0); the TUI names that task as its
    steps do, ``[T1 task]``, and the page says the same (it said ``[Task 0]`` beside transcript steps
    ``T1.1``). The recording's text is left as the slot-filler read it."""
    rec = ROOT / "recordings" / "sample-quick-fixed-user_001"
    page = tmp_path / "fixed.html"
    export(str(rec), "--case", "user_001:geographic_knowledge:longctx_full", "--out", str(page))
    text = page.read_text()
    assert "[Task " not in text
    for task in ("[T1 task] I need to send my teacher", "[T2 task] Can you help me plan",
                 "[T3 task] Can you help me write"):
        assert task in text, task
    assert "[Task 0] I need to send my teacher" in (rec / "payloads.jsonl").read_text()  # stored as it was
