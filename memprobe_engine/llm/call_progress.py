"""What a model call is doing before its reply streams: starting the model, waiting for the server,
evaluating the prompt (so many of so many tokens). A live view (the replay's re-run panel) shows it,
because on a small CPU the prompt of one slot-fill takes minutes before the first token comes.

The backends report through a context variable instead of a parameter: the progress belongs to the
call being made in the current task, only a viewer asks for it, and a parameter would change the
signature of every backend (replay, endpoints, test doubles) for that. The chat client reports
"waiting" as it sends; the embedded model's backend reports its start and llama.cpp's
``prompt_progress`` (which it asks for only while someone listens, see :func:`listening`).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from memprobe_engine.llm.hashing import current_role


@dataclass(frozen=True)
class CallProgress:
    """One step of a call before (or while) its reply streams.

    ``what`` says the step in words (``starting the embedded model local:1.5b``, ``evaluating the
    prompt``); for the prompt, ``done`` of ``total`` tokens are evaluated, ``cached`` of them came
    from the server's prompt cache."""

    what: str
    done: int | None = None
    total: int | None = None
    cached: int = 0
    #: The role the call is made for (``slot_filler``); :func:`report` fills it in from the chat
    #: client's ``current_role`` when the reporter does not know it (a backend).
    role: str | None = None

    def describe(self) -> str:
        """``slot_filler: evaluating the prompt: 512/1,834 tokens (27 %)``; without counts, the step alone."""
        said = f"{self.role}: {self.what}" if self.role else self.what
        if self.total is None or self.done is None:
            return said
        share = f" ({100 * self.done // self.total} %)" if self.total else ""
        cached = f", {self.cached:,} from cache" if self.cached else ""
        return f"{said}: {self.done:,}/{self.total:,} tokens{share}{cached}"


ProgressListener = Callable[[CallProgress], None]

_listener: contextvars.ContextVar[ProgressListener | None] = contextvars.ContextVar(
    "memprobe_call_progress", default=None)


@contextlib.contextmanager
def reporting_to(listener: ProgressListener) -> Iterator[None]:
    """Send the progress of the calls made in this context (this task, the tasks and threads it
    starts) to ``listener``, which must be cheap and thread-safe."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


def listening() -> bool:
    """Whether anyone listens (a backend asks its server for progress only then)."""
    return _listener.get() is not None


def report(progress: CallProgress) -> None:
    """Tell the listener of this context, if any (with the role of the call under way)."""
    listener = _listener.get()
    if listener is not None:
        if progress.role is None and (role := current_role.get()) is not None:
            progress = dataclasses.replace(progress, role=role)
        listener(progress)
