"""Expected model use before a run: calls and tokens per role as a low / expected / high range.

Shared by both protocols' dry-run estimates (``recovery/estimate.py``, ``paradigms/estimate.py``) and
the table that prints them beside a recording's actual use (``cli/estimate_view.py``).

Tokens are characters / 5.0 (low) to / 3.2 (high), 3.8 expected — the span of the ratios measured on
recorded calls of the embedded model and of an OpenAI tokenizer on English prose.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CHARS_PER_TOKEN = {"low": 5.0, "expected": 3.8, "high": 3.2}
#: Completion tokens of one structured answer when the reply cap does not bind (measured median-ish
#: replies of the embedded judge roles: 35–90 tokens).
ANSWER_TOKENS = (25, 60)

Triple = tuple[float, float, float]


@dataclass
class Span3:
    """A low / expected / high triple."""

    low: float = 0.0
    expected: float = 0.0
    high: float = 0.0

    def add(self, low: float, expected: float, high: float) -> None:
        self.low += low
        self.expected += expected
        self.high += high

    def scaled(self, calls: Span3) -> Span3:
        return Span3(self.low * calls.low, self.expected * calls.expected, self.high * calls.high)


@dataclass
class RoleEstimate:
    role: str
    calls: Span3 = field(default_factory=Span3)
    prompt_tokens: Span3 = field(default_factory=Span3)
    completion_tokens: Span3 = field(default_factory=Span3)

    def add_calls(self, calls: Triple, prompt_chars: Triple, completion: Triple) -> None:
        """``calls`` calls of ``prompt_chars`` characters each (low/expected/high) and ``completion``
        tokens each."""
        self.calls.add(*calls)
        self.prompt_tokens.add(calls[0] * prompt_chars[0] / CHARS_PER_TOKEN["low"],
                               calls[1] * prompt_chars[1] / CHARS_PER_TOKEN["expected"],
                               calls[2] * prompt_chars[2] / CHARS_PER_TOKEN["high"])
        self.completion_tokens.add(calls[0] * completion[0], calls[1] * completion[1], calls[2] * completion[2])

    @property
    def tokens(self) -> Span3:
        """Prompt and completion tokens together."""
        return Span3(self.prompt_tokens.low + self.completion_tokens.low,
                     self.prompt_tokens.expected + self.completion_tokens.expected,
                     self.prompt_tokens.high + self.completion_tokens.high)


@dataclass
class CostEstimate:
    roles: dict[str, RoleEstimate]
    notes: list[str] = field(default_factory=list)

    def role(self, name: str) -> RoleEstimate:
        return self.roles.setdefault(name, RoleEstimate(name))

    @property
    def tokens(self) -> Span3:
        total = Span3()
        for role in self.roles.values():
            total.add(role.tokens.low, role.tokens.expected, role.tokens.high)
        return total


def answer_tokens(cap: int | None, typical: tuple[float, float] = ANSWER_TOKENS) -> Triple:
    """Completion tokens of one structured answer: low, typical (never past the cap), the cap (or 4×
    typical without one)."""
    low, mid = typical
    high = float(cap) if cap is not None else 4 * mid
    return low, min(mid, high), high
