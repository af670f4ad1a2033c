"""Protocol A's outcomes fold as the replay index keeps it: every case's slot-fill, judge score and
re-scores, label and category, folded as the index pass reads them by the same fold the report uses
(:class:`~memprobe_engine.recovery.outcomes.OutcomeFold`), so an overview needs no second pass."""

from __future__ import annotations

from memprobe_engine.events.scoring import AttributionLabel, JudgeScore, SlotFill
from memprobe_engine.events.union import AnyEvent
from memprobe_engine.recovery.outcomes import OutcomeFold
from memprobe_engine.replay.index import SpanRec
from memprobe_engine.replay.session import ReplaySession

#: The name the fold is attached under in a session's index.
FOLD_NAME = "recovery.outcomes"


class OutcomeIndexFold:
    """An :class:`~memprobe_engine.replay.index.IndexFold` holding one :class:`OutcomeFold`."""

    kinds = frozenset({"slot_fill", "judge_score", "attribution_label"})

    def __init__(self) -> None:
        self.outcomes = OutcomeFold()

    def add(self, event: AnyEvent) -> None:
        if isinstance(event, (SlotFill, JudgeScore, AttributionLabel)):
            self.outcomes.add(event)

    def add_span(self, span: SpanRec) -> None:
        # The fold's category rule, fed from the checked span fields (spans are many: they are not
        # validated into SpanBegin models).
        if span.kind in ("dimension", "episode"):
            dimension, category = span.dimension or span.attrs.get("dimension"), span.attrs.get("category")
            if isinstance(dimension, str) and isinstance(category, str):
                self.outcomes.add_category(span.system, span.user_id, dimension, category)


def outcomes(session: ReplaySession) -> OutcomeFold:
    """The session's outcomes fold (attached now, with one scan, if the session was opened without it)."""
    return session.index.attach(FOLD_NAME, OutcomeIndexFold(), session.reader).outcomes
