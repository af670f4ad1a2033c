"""Protocol A's outcomes fold as the replay index keeps it: every case's slot-fill, judge score and
re-scores, label and category, folded as the index pass reads them by the same fold the report uses
(:class:`~memprobe_engine.recovery.outcomes.OutcomeFold`), so an overview needs no second pass.

One fold per judgment layer (``EventBase.layer``): the run's own (``None``, shown as ``main``) and each
layer ``memprobe rescore --as NAME`` added, so the TUI can show any of them without a second pass.
Categories come from spans whatever their layer: every fold gets each one."""

from __future__ import annotations

from memprobe_engine.events.scoring import AttributionLabel, JudgeScore, SlotFill
from memprobe_engine.events.union import AnyEvent
from memprobe_engine.recovery.outcomes import OutcomeFold
from memprobe_engine.replay.index import SpanRec
from memprobe_engine.replay.session import ReplaySession

#: The name the fold is attached under in a session's index.
FOLD_NAME = "recovery.outcomes"


class OutcomeIndexFold:
    """An :class:`~memprobe_engine.replay.index.IndexFold` holding one :class:`OutcomeFold` per layer."""

    kinds = frozenset({"slot_fill", "judge_score", "attribution_label"})

    def __init__(self) -> None:
        self.outcomes = OutcomeFold()
        #: Named layers' folds, in first-seen order.
        self.layers: dict[str, OutcomeFold] = {}
        self._categories: list[tuple[str | None, str | None, str, str]] = []

    def add(self, event: AnyEvent) -> None:
        if isinstance(event, (SlotFill, JudgeScore, AttributionLabel)):
            self.fold(event.layer, create=True).add(event)

    def add_span(self, span: SpanRec) -> None:
        # The fold's category rule, fed from the checked span fields (spans are many: they are not
        # validated into SpanBegin models).
        if span.kind in ("dimension", "episode"):
            dimension, category = span.dimension or span.attrs.get("dimension"), span.attrs.get("category")
            if isinstance(dimension, str) and isinstance(category, str):
                self._categories.append((span.system, span.user_id, dimension, category))
                for fold in (self.outcomes, *self.layers.values()):
                    fold.add_category(span.system, span.user_id, dimension, category)

    def fold(self, layer: str | None, *, create: bool = False) -> OutcomeFold:
        """The fold of ``layer`` (None: the run's own); an empty one for a layer not recorded."""
        if layer is None:
            return self.outcomes
        found = self.layers.get(layer)
        if found is None:
            found = OutcomeFold(layer)
            for category in self._categories:
                found.add_category(*category)
            if create:
                self.layers[layer] = found
        return found


def outcome_index(session: ReplaySession) -> OutcomeIndexFold:
    """The session's outcomes index fold (attached now, with one scan, if the session was opened without it)."""
    return session.index.attach(FOLD_NAME, OutcomeIndexFold(), session.reader)


def outcomes(session: ReplaySession, layer: str | None = None) -> OutcomeFold:
    """The session's outcomes fold of judgment ``layer`` (None: the run's own judgments)."""
    return outcome_index(session).fold(layer)


def judgment_layers(session: ReplaySession) -> list[str]:
    """The named judgment layers the recording holds (``memprobe rescore --as NAME``), first seen first."""
    with session.index.lock:
        return list(outcome_index(session).layers)
