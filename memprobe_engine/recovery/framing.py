"""How protocol A's prompts are framed for the model that answers them.

``release`` (the default) lays every prompt out as the recovery release's runner does, so a run
measures the paper's protocol. ``embedded`` keeps the same content — what each role sees, the
rubric, the labels — but frames it for a small model on a CPU (docs/protocol-a.md, "Framing for
small models"):

* slot-fill, judge and attribution put every fixed part (rules, rubric, reply shape) before the
  parts that vary per dimension, so the server's prefix cache serves one store's rules to every
  dimension and every stage's instructions to every case;
* the slot-filler is told that a bare evaluative word is no label and that a note it cites must
  show in the label; the judge first states what trait the prediction names, and is told that a
  prediction naming none scores at most 0.25;
* the simulated user's request is a chat log the model continues with the user's next line (persona
  and bank in the system prompt, the dialogue as a trailing assistant message that ends where the
  user's line opens), and a line that speaks as the assistant is asked for again, then unusable.

The framing is recorded in the header (``config.framing``, only when not ``release``, so
recordings made before it existed keep their fingerprint); ``memprobe rescore`` uses the
recording's own framing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from memprobe_engine.errors import ConfigError

if TYPE_CHECKING:
    pass

Framing = Literal["release", "embedded"]
FRAMINGS: tuple[Framing, ...] = ("release", "embedded")
DEFAULT_FRAMING: Framing = "release"


def check_framing(name: str, *, where: str = "--framing") -> Framing:
    for framing in FRAMINGS:
        if name == framing:
            return framing
    raise ConfigError(f"{where} {name!r}: use release (the recovery release's prompt layout) or embedded (the same "
                      f"content framed for a small model; docs/protocol-a.md).")
