"""Exclusion policies: what a case becomes when a scoring input or a scoring role's output is unusable.

Two named policies, recorded in the run header (``config.policy``) and printed under every report
table:

``paper`` (the default)
    The recovery release's behaviour, so a fresh run is comparable with the paper. A store too
    large for the reader is still "sent": the release's call failed and the answer was scored as
    ``unknown`` = 0, counted in B and in attribution. Unparseable role outputs take the release's
    defaults: a slot-fill's raw text (or ``unknown``) is the label, a judge verdict is 0, stage 0
    says the task *can* invite the dimension, stage 1 says *not disclosed*, stage 2 leaves the
    case unclassified (our ``excluded`` label, outside Table 4's five columns).

``audit``
    Ours: such a case is an exclusion with its reason (and, for an overflow, the size
    diagnostic), left out of B and attribution, never a zero.

Under both policies a simulator reply that stays unusable never counts against metric A: under
``paper`` the episode goes on with a follow-up (the release's fallback) and, if it then fails to
reach satisfaction, it is excluded from A; under ``audit`` the episode ends there, excluded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from memprobe_engine.errors import ConfigError
from memprobe_engine.llm.structured import StructuredOutputError, extract_json

if TYPE_CHECKING:
    pass

ExclusionPolicy = Literal["paper", "audit"]
POLICIES: tuple[ExclusionPolicy, ...] = ("paper", "audit")
DEFAULT_POLICY: ExclusionPolicy = "paper"

DESCRIPTIONS: dict[ExclusionPolicy, str] = {
    "paper": "paper (the release's rules: overflowed stores and unparseable scoring outputs take the "
             "release's defaults, e.g. unknown = 0, and count in B and attribution)",
    "audit": "audit (overflowed stores and unparseable scoring outputs are excluded from B and attribution, "
             "with their reason)",
}


def check_policy(name: str, *, where: str = "--policy") -> ExclusionPolicy:
    """The policy called ``name``; ConfigError naming the setting and the valid names otherwise."""
    value = name.strip().lower()
    for policy in POLICIES:
        if value == policy:
            return policy
    raise ConfigError(f"{where} {name!r}: unknown exclusion policy; use one of {', '.join(POLICIES)} "
                      f"(see docs/protocol-a.md).")


def release_label(raw_text: str) -> str:
    """What the release's slot-filler made of an answer it could not parse: the ``label`` field of
    whatever JSON object the text holds, else the raw text itself, else ``unknown``."""
    try:
        value = extract_json(raw_text)
    except StructuredOutputError:
        return raw_text.strip() or "unknown"
    label = value.get("label") if isinstance(value, dict) else None
    return str(label).strip() if label is not None and str(label).strip() else "unknown"


def release_user_text(raw_text: str) -> str:
    """The text the release's simulator fell back to: the ``text`` field of the reply's JSON, if any."""
    try:
        value = extract_json(raw_text)
    except StructuredOutputError:
        return ""
    text = value.get("text") if isinstance(value, dict) else None
    return str(text).strip() if isinstance(text, str) else ""



#: One line each, for the footer under a report table (fits 100 columns).
FOOTERS: dict[ExclusionPolicy, str] = {
    "paper": "exclusion policy: paper (overflowed / unparseable cases scored as the release did: unknown = 0)",
    "audit": "exclusion policy: audit (overflowed / unparseable cases excluded, counted in excl.)",
}


def policy_footer(policies: dict[str, ExclusionPolicy]) -> str:
    """The line printed under every report table: which exclusion policy its numbers follow (named
    per recording when recordings differ)."""
    used = sorted(set(policies.values()))
    if len(used) == 1:
        return FOOTERS[used[0]]
    per = "; ".join(f"{name}: {policy}" for name, policy in sorted(policies.items()))
    return f"exclusion policies differ between recordings ({per}); see docs/protocol-a.md"
