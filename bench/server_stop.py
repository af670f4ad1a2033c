"""How long the embedded server takes to stop with a long prompt in flight, and its prompt throughput,
at llama.cpp's default step size (2048 tokens) and at MemProbe's (``local.BATCH_TOKENS``).

    python bench/server_stop.py [--tier 1.5b] [--prompt-tokens 4500]

A stop (Ctrl-C or SIGTERM on a run) waits for the server's loop step in progress; with a 2048-token
step a long simulator prompt holds it for about a minute on two cores. For each step size this starts
a fresh one-slot server, measures prompt throughput on one long request from llama.cpp's own timings,
then sends the same prompt again with the cache off, stops the server a few seconds in and prints how
long the stop took.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memprobe_engine.llm.backends import local  # noqa: E402
from memprobe_engine.llm.spec import ModelSpec  # noqa: E402
from memprobe_engine.llm.types import ChatMessage, ChatRequest, SamplingParams  # noqa: E402


def long_prompt(tokens: int) -> str:
    # about 18 tokens per note with the Qwen tokenizer (4,500 asked gives the 4,563 measured)
    return " ".join(f"Note {i}: the user mentioned item {i} while planning a trip." for i in range(tokens // 18))


async def one(step: int, tier: str, prompt_tokens: int, stop_after_s: float) -> str:
    local.BATCH_TOKENS = step
    backend = local.LocalBackend(ModelSpec(backend="local", model=tier, slots=1, prompt_cache=False, draft="none"))
    text = long_prompt(prompt_tokens)
    request = ChatRequest(model=tier, messages=(ChatMessage(role="user", content=text + "\nSummarize."),),
                          params=SamplingParams(temperature=0.0, max_tokens=8))
    before = await backend.counters()
    await backend.complete(request)
    after = await backend.counters()
    rate = (after.prompt_tokens - before.prompt_tokens) / max(1e-9, after.prompt_seconds - before.prompt_seconds)
    again = ChatRequest(model=tier, messages=(ChatMessage(role="user", content=text + "\nSummarize again."),),
                        params=SamplingParams(temperature=0.0, max_tokens=8))
    pending = asyncio.ensure_future(backend.complete(again))
    await asyncio.sleep(stop_after_s)
    pending.cancel()
    started = time.monotonic()
    await backend.aclose()  # the last user of the server: this stops it
    stopped = time.monotonic() - started
    return (f"step {step:>4} tokens: prompt {after.prompt_tokens - before.prompt_tokens} tokens at {rate:.1f} tok/s; "
            f"stop with a {after.prompt_tokens - before.prompt_tokens}-token prompt in flight took {stopped:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", default="1.5b")
    parser.add_argument("--prompt-tokens", type=int, default=4500)
    parser.add_argument("--stop-after", type=float, default=5.0, help="seconds into the second prompt")
    args = parser.parse_args()
    shipped = local.BATCH_TOKENS
    for step in (2048, shipped):
        print(asyncio.run(one(step, args.tier, args.prompt_tokens, args.stop_after)), flush=True)


if __name__ == "__main__":
    main()
