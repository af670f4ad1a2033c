"""bench/critical_path.py's virtual clock: model-call latency (timers) counts, worker-thread work does not.

A unit that embeds waits on a worker thread between its calls. The clock must stand still while it
does, or the other units' timers run ahead and the embedding unit's chain starts late by however long
the thread took in real time (issue 35's path measured 26.2 s with a cold embedding cache, 15.0 s warm).
"""

from __future__ import annotations

import asyncio
import time

from bench.critical_path import run_virtual


async def _job() -> list[float]:
    loop = asyncio.get_running_loop()
    ends: list[float] = []

    async def embeds_then_calls() -> None:
        await asyncio.to_thread(time.sleep, 0.3)  # the embedding model: real time, no virtual time
        await asyncio.sleep(1.0)  # one model call
        ends.append(loop.time())

    async def calls_only() -> None:
        for _ in range(5):
            await asyncio.sleep(1.0)
        ends.append(loop.time())

    await asyncio.gather(embeds_then_calls(), calls_only())
    return ends


def test_thread_work_takes_no_virtual_time_while_other_timers_wait() -> None:
    ends, seconds = run_virtual(_job())
    # Jumping to the other unit's timers during the thread's 0.3 s would end the first chain at 2.0 or later.
    assert ends == [1.0, 5.0]
    assert seconds == 5.0


def test_a_thread_alone_still_finishes() -> None:
    result, seconds = run_virtual(asyncio.to_thread(sum, [1, 2, 3]))
    assert (result, seconds) == (6, 0.0)
