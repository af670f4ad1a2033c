"""A key echoed in a streamed reply is scrubbed even when the server splits it between pieces."""

from __future__ import annotations

from pathlib import Path

import pytest

from memprobe_engine.events.recorder import NULL_RECORDER, Recorder
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.llm.stream_scrub import StreamScrubber
from memprobe_engine.llm.types import ChatMessage
from tests.doubles import ScriptedBackend, read_events, temp_recording

KEY = "zq-Secret-Value-1234567"
REPLY = f"Sure. Your key is {KEY} and the header was Bearer abc.def-ghi, token sk-ABCDEFGHIJKLMNOP end."


def _client(backend: ScriptedBackend, recorder: Recorder = NULL_RECORDER) -> ChatClient:
    config = load_llm_config(None, {}, ["openai:test-model@http://127.0.0.1:1/v1"])
    return ChatClient(config, recorder, backend_factory=lambda spec: backend, env={"OPENAI_API_KEY": KEY})


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 11, 16])
def test_every_split_of_the_reply_emits_what_scrubbing_the_whole_reply_emits(size: int) -> None:
    client = _client(ScriptedBackend([]))
    scrubber = StreamScrubber(client.scrub, client.secret_values())
    shown = [scrubber.feed(REPLY[at:at + size]) for at in range(0, len(REPLY), size)] + [scrubber.flush()]
    joined = "".join(shown)
    assert joined == client.scrub(REPLY)
    assert KEY not in joined and "ABCDEFGH" not in joined and "abc.def" not in joined
    # No emitted piece holds a fragment of the configured key longer than a few characters.
    assert not any(KEY[i:i + 6] in piece for piece in shown for i in range(len(KEY) - 5))


def test_a_secret_that_ends_like_a_key_shape_is_not_cut_in_two() -> None:
    scrubber = StreamScrubber(lambda text: text.replace("my-key.s", "***"), ["my-key.s"])
    # The trailing "s" could open an sk- token, but it ends a whole configured value: scrub all of it.
    assert scrubber.feed("it is my-key.s") + scrubber.flush() == "it is ***"


async def test_a_streamed_reply_cut_inside_the_key_never_shows_or_records_it(tmp_path: Path) -> None:
    backend = ScriptedBackend([REPLY], piece_size=4)
    with temp_recording(tmp_path / "rec") as recorder:
        client = _client(backend, recorder)
        stream = client.stream("agent", [ChatMessage(role="user", content="echo my key")])
        pieces = [piece async for piece in stream]
    assert KEY not in "".join(pieces) and all(KEY[:6] not in p and KEY[-6:] not in p for p in pieces)
    (event,) = read_events(tmp_path / "rec")
    assert KEY not in event["response_text"] and "***" in event["response_text"]


SHAPED = ("hf_" + "a1B2c3D4e5" * 3, "gsk_" + "Z9y8X7w6V5" * 3, "AIzaSy" + "Q1w2E3r4T5" * 3, "ghp_" + "k3Y" * 12,
          "xai-" + "m0N1b2V3c4" * 3, "sk-ant-api03-" + "Abc123-_" * 4, "github_pat_" + "11AB" * 8)


@pytest.mark.parametrize("size", [1, 3, 8])
def test_keys_of_every_public_shape_are_scrubbed_across_pieces_and_words_stay(size: int) -> None:
    client = _client(ScriptedBackend([]))
    reply = "task-oriented hf_hub_download; " + " and ".join(SHAPED) + " end"
    scrubber = StreamScrubber(client.scrub, client.secret_values())
    shown = "".join([scrubber.feed(reply[at:at + size]) for at in range(0, len(reply), size)] + [scrubber.flush()])
    assert shown == client.scrub(reply)
    assert not any(key[len(key) // 2:] in shown for key in SHAPED)
    assert shown.startswith("task-oriented hf_hub_download; hf_*** and gsk_*** and AIza***")
