"""The current outcome of every protocol-A recovery case: the one fold of its scoring events.

A recording is an append-only log, so one case — a (system, user, dimension, mode) — can be said
more than once: a unit interrupted and re-run scores its dimensions again, and a re-score appends a
later ``judge_score`` whose ``rescore_of`` points at the score it re-does. Which of those is *the*
outcome is decided here, once, for both readers of outcomes: the report's pandas frames
(``recovery/read/frames.py``) and the replay's overview and inspector (``recovery/read/scores.py``, fed
incrementally by the run index). Both feed the events in recording order, so both count the same.

The rules:

* The case of a slot-fill, judge score or attribution label is its scope (system, user, dimension)
  and its mode. A re-score emitted outside a case's scope still belongs to the case of the score it
  re-scores (found by ``rescore_of``).
* The latest event in recording order is current: the latest slot-fill, the latest attribution
  label, and the latest judge score — a re-score, or a newer original when the unit was re-run after
  it was re-scored (the new attempt starts from a new slot-fill, which the older re-score did not
  read). The original and every re-score stay on record; :attr:`Outcome.original` and
  :attr:`Outcome.rescores` keep what an inspector shows next to each other.
* A case is *excluded* when its current judge score says so, else when its slot-fill does (store
  overflow under the audit policy, unparseable output), else when it was filled but never judged
  ("no judge score recorded"). A case counts towards B only when it has a score and no exclusion.
* Each judgment layer is folded on its own (``EventBase.layer``): a fold built for one layer (by
  default the run's own, ``None``) reads the slot-fills, scores and labels of that layer only, so a
  re-score kept as a named layer never replaces the run's own outcome. Within a named layer, the
  layer's first judgment of a case is that case's original there (it re-scores the run's own, which
  the layer's fold never sees), a later one of the layer its re-score. Categories come from spans
  whatever their layer.
* A category comes from the ``dimension`` or ``episode`` span of the case's (system, user); a
  recording that names it only for another unit still gives the dimension's category.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from memprobe_engine.events.run import SpanBegin
from memprobe_engine.events.scoring import AttributionLabel, JudgeScore, SlotFill

#: (system, user_id, dimension, mode)
CaseKey = tuple[str, str, str, str]
#: The event kinds the fold reads (span_begin for categories).
OUTCOME_KINDS: tuple[str, ...] = ("span_begin", "slot_fill", "judge_score", "attribution_label")
NOT_JUDGED = "no judge score recorded"
_CATEGORY_SPANS = ("dimension", "episode")


@dataclass(frozen=True, slots=True)
class JudgeRecord:
    """What the fold keeps of one judge score (texts such as the reason stay in the recording)."""

    seq: int
    score: float | None
    excluded: str | None
    rescore_of: int | None


@dataclass(slots=True)
class Outcome:
    """The current state of one case."""

    filled: bool = False
    label: str | None = None
    fill_excluded: str | None = None
    overflow: bool = False
    fill_seq: int | None = None
    #: The latest original score (no ``rescore_of``), and the re-scores recorded after it.
    original: JudgeRecord | None = None
    rescores: list[JudgeRecord] = field(default_factory=list)
    attribution: str | None = None

    @property
    def judge(self) -> JudgeRecord | None:
        """The current judge score: the latest re-score after the current original, else the original."""
        return self.rescores[-1] if self.rescores else self.original

    @property
    def judged(self) -> bool:
        return self.judge is not None

    @property
    def score(self) -> float | None:
        current = self.judge
        return None if current is None else current.score

    @property
    def excluded(self) -> str | None:
        """Why the case does not count (None when it does, or when it was never filled nor judged)."""
        current = self.judge
        reason = (current.excluded if current is not None else None) or self.fill_excluded
        if reason is None and current is None and self.filled:
            return NOT_JUDGED
        return reason

    @property
    def usable(self) -> bool:
        """Counts towards B: judged with a score and not excluded."""
        return self.score is not None and self.excluded is None


class OutcomeFold:
    """Folds scoring events, given in recording order, into the current :class:`Outcome` per case."""

    def __init__(self, layer: str | None = None) -> None:
        #: The judgment layer this fold reads (None: the run's own judgments).
        self.layer = layer
        self.cases: dict[CaseKey, Outcome] = {}
        self.categories: dict[tuple[str, str, str], str] = {}  # (system, user, dimension) -> category
        self.dimension_categories: dict[str, str] = {}
        #: Scoring events that name no system, user or dimension (left out, and counted).
        self.unscoped = 0
        self._judge_case: dict[int, CaseKey] = {}

    # -- feeding -----------------------------------------------------------------------------------
    def add(self, event: SpanBegin | SlotFill | JudgeScore | AttributionLabel) -> None:
        """Fold one event (other span kinds than dimension/episode are ignored)."""
        if isinstance(event, SpanBegin):
            self._span(event)
        elif event.layer != self.layer:
            return
        elif isinstance(event, JudgeScore):
            self._judge(event)
        else:
            key = self._key(event)
            if key is None:
                self.unscoped += 1
            elif isinstance(event, SlotFill):
                case = self.cases.setdefault(key, Outcome())
                case.filled, case.label, case.overflow = True, event.label, event.overflow
                case.fill_excluded, case.fill_seq = event.excluded, event.seq
            else:
                self.cases.setdefault(key, Outcome()).attribution = event.label

    def add_category(self, system: str | None, user_id: str | None, dimension: str, category: str) -> None:
        """Record a dimension's category (from a span the caller has already read)."""
        self.dimension_categories[dimension] = category
        if system is not None and user_id is not None:
            self.categories[(system, user_id, dimension)] = category

    def _span(self, event: SpanBegin) -> None:
        if event.span_kind not in _CATEGORY_SPANS:
            return
        dimension = event.dimension or event.attrs.get("dimension")
        category = event.attrs.get("category")
        if isinstance(dimension, str) and isinstance(category, str):
            self.add_category(event.system, event.user_id, dimension, category)

    @staticmethod
    def _key(event: SlotFill | JudgeScore | AttributionLabel) -> CaseKey | None:
        if event.system is None or event.user_id is None or event.dimension is None:
            return None
        return (event.system, event.user_id, event.dimension, event.mode)

    def _judge(self, event: JudgeScore) -> None:
        own = self._key(event)
        key = own
        if event.rescore_of is not None and (own is None or event.rescore_of in self._judge_case):
            # A re-score belongs to the case it re-scores, wherever it was emitted.
            key = self._judge_case.get(event.rescore_of, own)
        if key is None:
            self.unscoped += 1
            return
        record = JudgeRecord(seq=event.seq, score=event.score, excluded=event.excluded, rescore_of=event.rescore_of)
        case = self.cases.setdefault(key, Outcome())
        # A named layer's first judgment of a case re-scores the run's own (``rescore_of`` points out of
        # this layer): within the layer it is the original, a later one of the layer its re-score.
        first_of_layer = self.layer is not None and case.original is None and event.rescore_of not in self._judge_case
        if event.rescore_of is None or first_of_layer:
            case.original, case.rescores = record, []
        else:
            case.rescores.append(record)
        self._judge_case[event.seq] = key

    # -- reading -----------------------------------------------------------------------------------
    def category(self, system: str, user_id: str, dimension: str) -> str | None:
        """The case's category: from its own unit's span, else from any span naming the dimension."""
        return self.categories.get((system, user_id, dimension), self.dimension_categories.get(dimension))

    def judged_cases(self) -> Iterator[tuple[CaseKey, Outcome]]:
        """Cases with a judge score (original or re-score), in first-seen order."""
        return ((key, case) for key, case in self.cases.items() if case.judged)

    def scored_cases(self) -> Iterator[tuple[CaseKey, Outcome]]:
        """Cases that were filled or judged: the rows of the report's score frame."""
        return ((key, case) for key, case in self.cases.items() if case.filled or case.judged)

    def case_of_judge(self, seq: int) -> CaseKey | None:
        """The case a judge score (by seq) was folded into."""
        return self._judge_case.get(seq)


def category_balanced(scores_by_category: dict[str, list[float]], order: tuple[str, ...]) -> float | None:
    """B of one (system, user, mode): the equal-weight mean of per-category means, summed in ``order``
    (the canonical category order) and then any other category by name — the release's arithmetic."""
    means = [sum(values) / len(values) for values in
             (scores_by_category[c] for c in [*[c for c in order if c in scores_by_category],
                                              *sorted(set(scores_by_category) - set(order))]) if values]
    return sum(means) / len(means) if means else None
