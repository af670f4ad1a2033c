"""Dimension inspector: one (user, system, dimension) — target and explanation, its task, the turns
that carried evidence, slot-fill and judge under both access modes, retrieved top-k with scores,
attribution stages — and the re-run panel.

The re-run is a separate hook: an exclusive async worker awaits the engine's re-score function
(:data:`memprobe_engine.replay.RescoreFunction`) with a sink that turns its output into messages;
Escape cancels it. New scores show beside the originals as they arrive; when the re-score ends the
screen re-reads the recording, where the engine appended them.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input

from memprobe_engine.errors import MemProbeError
from memprobe_engine.recovery.read import DimensionDetail, RescoreFunction, RescoreRequest, dimension_detail
from memprobe_engine.recovery.read.outcome_index import judgment_layers
from memprobe_engine.recovery.read.why import WhyChain, embedder_name, make_embed, why_chain
from memprobe_engine.replay import ReplaySession, systems, unit_dimensions
from memprobe_engine.llm.call_progress import CallProgress
from memprobe_tui.messages import Loaded, RescoreProgress, RescoreScore, RescoreStage, RescoreText
from memprobe_tui.recovery.layers import NO_LAYERS, layer_title, next_layer
from memprobe_tui.recovery.render_dimension import dimension_lines, judge_call
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.screens.rerun_screen import RerunScreen
from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_tui.widgets.rerun_panel import RerunPanel
from memprobe_tui.recovery.navigation import open_transcript, rescore_of


class MessageSink:
    """A :class:`memprobe_engine.replay.RescoreSink` that posts to a screen (safe from any thread)."""

    def __init__(self, screen: ReplayScreen) -> None:
        self._post = screen.post_message

    def _send(self, message: Message) -> None:
        self._post(message)

    def text(self, piece: str, stage: str | None = None) -> None:
        self._send(RescoreText(piece, stage=stage))

    def note(self, message: str) -> None:
        self._send(RescoreText(message, note=True))

    def stage(self, mode: str, stage: int, verdict: str, reason: str | None) -> None:
        self._send(RescoreStage(mode, stage, verdict, reason))

    def score(self, mode: str, score: float | None, reason: str | None) -> None:
        self._send(RescoreScore(mode, score, reason))

    def progress(self, progress: CallProgress) -> None:
        self._send(RescoreProgress(progress))


class DimensionScreen(RerunScreen):
    """``dimension`` None opens the unit's first dimension."""

    HELP = """\
**Dimension inspector** for one user × system × hidden dimension. *target*: the hidden user state
the memory should let an assistant recover (short form, then the explanation). *task*: the
request whose episode was meant to surface it. *evidence turns*: the turns that carried it (matched
on the attribution's stage-1 evidence, else on the target's words).

Then per access mode — **dump_all** (the slot-filler read the full store) and **retrieve** (only
the top-k items retrieved for the query, shown with their similarity scores):

| line | meaning |
| --- | --- |
| slot-fill | what the slot-filler recovered from memory (— excluded, with the reason) |
| judge | the recovery judge's 0–1 score; `re-score (n)` the latest of n recorded re-scores; `re-run` a live re-run |
| stage 0 | task design: can the task invite the dimension at all (can_invite / cannot_invite) |
| stage 1 | disclosure: did the user disclose it in the dialogue (disclosed → a memory failure if not recovered) |
| stage 2 | elicitation vs strictness: was it elicited, or is the judge too strict |
| attribution | the resulting label: ok, memory_failure, task_design_failure, … |

`r` re-runs slot-fill, judge and attribution with fresh model calls: it first asks for the model
(prefilled with the configured slot-filler's; Enter runs, Esc cancels, nothing is written until
Enter), because the new scores are appended to the recording. While it runs the status line shows
the step, elapsed time and an upper-bound ETA, and the line below it what the model call does (the
embedded model starting, the prompt evaluated so far: `512/1,708 tokens`, the reply streaming); Esc
cancels. `c` opens the recovery judge's LLM call (the slot-filler's when a rubric scored it
without a call), `m` the store as the slot-filler read it (at its fill, each item with the step
that wrote it; `kN` its rank in retrieve's top-k), `t` the task's transcript, `e` the first evidence
turn, `[`/`]` the previous/next dimension, `s` the next system, `L` the next judgment layer (the run's
own, `main`, then each one `memprobe rescore --as NAME` added: its fills, scores and labels instead).

The *why* block at the top answers "why was this not recovered?" as a chain: *disclosed* the user's
turn that carries the trait (quoted), *written* how many store items hold it and which steps wrote
them, then per mode *reach* (dump_all read them all; retrieve: their ranks in the top-k, or "none in
the top k; best relevant item ranked N" over the whole store), what the slot-filler *filled*, what the
judge *judged* → the attribution label, and the *stages* with each mode's own stage-1 evidence. An
item holds the trait when it names the target's proper names, quotes the stage-1 evidence, or (the
run's embedder, st:minilm by default) lies close to the target; ranks beyond the top-k come from
that embedder. `⚠` marks a recorded label the chain contradicts; the label stays as recorded.
Under each mode, *read* lists what the slot-filler read: the whole store (dump_all, the items that
hold the trait first, ★) or the top-k with similarity scores (retrieve), each item with `[T2.1]`,
the step (task 2, turn 1) that wrote it.
"""

    DEFAULT_CSS = """
    DimensionScreen #rerun-model { display: none; height: 3; }
    DimensionScreen #rerun-model.shown { display: block; }
    DimensionScreen DetailLog { height: 1fr; border-top: none; }
    DimensionScreen DetailLog:focus { border-top: heavy $accent; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "rerun", "Re-run", id="dimension.rerun"),
        Binding("right_square_bracket", "next_dimension(1)", "Dim", key_display="[/]", id="dimension.next"),
        Binding("left_square_bracket", "next_dimension(-1)", "Prev dim", show=False, id="dimension.prev"),
        Binding("s", "switch_system", "System", id="dimension.system"),
        Binding("t", "task", "Task", show=False, id="dimension.task"),  # the why block names it (80 columns)
        Binding("e", "evidence", "Evidence", show=False, id="dimension.evidence"),  # the why block names it
        Binding("c", "judge_call", "Call", id="dimension.call"),  # the judge's LLM call (short: 80 columns)
        Binding("m", "memory", "Store", id="dimension.memory"),
        Binding("L", "layer", "Judgments", show=False, id="dimension.layer"),  # named layers: rescore --as
        Binding("j,down", "scroll(1)", "Down", show=False, id="dimension.down"),
        Binding("k,up", "scroll(-1)", "Up", show=False, id="dimension.up"),
    ]
    RERUN_GROUP = "rescore"

    def __init__(self, session: ReplaySession, user_id: str, system: str, dimension: str | None, *,
                 judgment_layer: str | None = None) -> None:
        super().__init__(session)
        self.session: ReplaySession = session
        self.user_id, self.system, self.dimension = user_id, system, dimension
        #: The judgment layer shown (None: the run's own, ``main``; ``L`` cycles the named ones).
        self.judgment_layer = judgment_layer
        self.detail: DimensionDetail | None = None
        self.why: WhyChain | None = None
        self.live: dict[str, dict[str, Any]] = {}
        self._scroll_home = False  # another dimension or system: start at its top, not the old offset
        self._rescores_before: dict[str, int] = {}  # per mode, re-scores recorded when a re-run started
        self._panel_key: tuple[str, str, str, str] | None = None  # whose re-run the panel shows

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Input(placeholder="model spec for the slot-filler and judges (Enter re-runs and appends, Esc cancels)",
                    id="rerun-model", disabled=True)  # enabled while shown: never takes focus hidden
        yield DetailLog(id="dimension")
        yield RerunPanel(id="rerun")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        if self.dimension is None:
            names = unit_dimensions(self.session, self.user_id, self.system)
            self.dimension = names[0] if names else None
        self.reload()

    def _rerun_key(self) -> tuple[str, str, str, str]:
        return str(self.session.directory), self.user_id, self.system, self.dimension or ""

    def reload(self) -> None:
        super().reload()
        panel = self.query_one(RerunPanel)
        # The panel already showing this dimension's re-run keeps it: the recording grew by the
        # re-run's own events, and its outcome (done, cancelled) must stay on screen.
        if not self.rerun_running() and self._panel_key != self._rerun_key():
            self._panel_key = self._rerun_key()
            if (earlier := self.nav.rerun_logs.get(self._rerun_key())) is not None:
                panel.restore(f"re-score {self.dimension}", earlier)
            else:
                panel.remove_class("shown")
        if self.dimension is None:
            self.set_title(f"{self.user_id} × {self.system} · no dimensions recorded yet")
            return
        self.set_title(f"{self.user_id} × {self.system} · {self.dimension} · loading…")
        self._load(self.dimension)

    @work(thread=True, exclusive=True, group="load", exit_on_error=False, name="dimension detail")
    def _load(self, dimension: str) -> None:
        detail = dimension_detail(self.session, self.user_id, self.system, dimension, self.judgment_layer)
        self.post_message(Loaded("dimension", detail))
        self._load_why(detail)

    def _load_why(self, detail: DimensionDetail) -> None:
        """The why-chain: at once what needs no model, then with the run's embedder (loading it may
        take seconds the first time; the chain says so meanwhile)."""
        self.post_message(Loaded("why", why_chain(self.session, detail)))
        try:
            embed = make_embed(embedder_name(self.session))
            chain = why_chain(self.session, detail, embed)
        except Exception as err:  # no embedder here: the chain keeps what needs none, and says why
            self.post_message(Loaded("why_failed", f"{embedder_name(self.session)} unavailable: {err}"))
            return
        self.post_message(Loaded("why", chain))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        if message.what in ("why", "why_failed"):
            chain = message.data
            if message.what == "why_failed":
                self.notify(str(chain), severity="warning")
            elif (chain.user_id, chain.system, chain.dimension) == (self.user_id, self.system, self.dimension):
                self.why = chain
                self._draw()
            return
        self.detail = message.data
        if self.detail is not None and (self.why is None or self.why.dimension != self.detail.dimension
                                        or self.why.system != self.detail.system):
            self.why = None
        if self.live and self.detail is not None:  # a finished re-run read back from the recording
            for name, mode in self.detail.modes.items():
                if mode.pair is not None and mode.pair.rescores > self._rescores_before.get(name, mode.pair.rescores):
                    self.live.pop(name, None)  # now listed as the recorded re-score: not twice
        self._draw()

    def _draw(self) -> None:
        if self.detail is None:
            return
        d = self.detail
        self.set_title(layer_title(self.session, self.judgment_layer,
                                   f"{d.user_id} × {d.system} · {d.dimension} ({d.category})"))
        log = self.query_one(DetailLog)
        offset = log.scroll_offset
        log.show(dimension_lines(d, self.live, self.why, self.app.size.width))
        if self._scroll_home:
            self._scroll_home = False
            log.scroll_to(0, 0, animate=False)
        else:
            log.scroll_to(offset.x, offset.y, animate=False)

    # -- re-run --------------------------------------------------------------------------------
    def action_rerun(self) -> None:
        rescore = rescore_of(self.app)
        if rescore is None:
            self.notify("Re-score is not available in this build: memprobe_engine.recovery.rescore."
                        "rescore_dimension was not found.", severity="warning")
            return
        if self.dimension is None or self.rerun_running():
            return
        # A re-run appends to the audited recording: ask first, with the model it will use.
        # The title fits 80 columns (69 characters; the help says more).
        self.ask_model(self._default_model, "slot-filler and judge model · Enter re-runs and appends · Esc cancels")

    def _default_model(self) -> str:
        """The slot-filler's configured model (``memprobe replay --model/--config``, else the environment)."""
        from memprobe_engine.recovery.rescore import rescore_config

        configured = getattr(rescore_of(self.app), "keywords", {}).get("llm_config")  # the CLI's functools.partial
        try:
            return rescore_config(configured).spec_for("slot_filler").spec_string()
        except MemProbeError:
            return ""

    @on(Input.Submitted, "#rerun-model")
    def _model_chosen(self, event: Input.Submitted) -> None:
        self.close_model_box()
        rescore = rescore_of(self.app)
        if rescore is None or self.dimension is None:
            return
        self.live = {}
        self._rescores_before = {name: mode.pair.rescores if mode.pair else 0
                                 for name, mode in (self.detail.modes.items() if self.detail else [])}
        chosen = event.value.strip()
        spec = chosen if chosen and chosen != self._default_model() else None  # None: the configured models
        request = RescoreRequest(self.session.directory, self.user_id, self.system, self.dimension, model=spec)
        self._panel_key = self._rerun_key()
        self.query_one(RerunPanel).start(f"re-score {self.dimension}" + (f" with {spec}" if spec else ""),
                                         len(request.modes))
        self.query_one(DetailLog).focus()
        self._rerun(rescore, request)

    @work(exclusive=True, group="rescore", exit_on_error=False, name="re-score")
    async def _rerun(self, rescore: RescoreFunction, request: RescoreRequest) -> None:
        await self.reported(lambda: rescore(request, MessageSink(self)))

    @on(RescoreStage)
    def _rescore_stage(self, message: RescoreStage) -> None:
        self.live.setdefault(message.mode, {}).setdefault("stages", []).append((message.stage, message.verdict))
        self.query_one(RerunPanel).line(f"[{message.mode}] stage {message.stage}: {message.verdict}")
        self._draw()

    @on(RescoreScore)
    def _rescore_score(self, message: RescoreScore) -> None:
        self.live.setdefault(message.mode, {}).update(score=message.score, reason=message.reason)
        self.query_one(RerunPanel).line(f"[{message.mode}] new score: {message.score}")
        self._draw()

    def rerun_ended(self, outcome: str) -> None:
        panel = self.query_one(RerunPanel)
        panel.finish(outcome)
        if self.dimension is not None:  # kept for this session: reopening the inspector shows it again
            self.nav.rerun_logs[self._rerun_key()] = panel.text
        if outcome == "done":
            self._pick_up()

    @work(thread=True, exclusive=True, group="follow", exit_on_error=False, name="read re-score")
    def _pick_up(self) -> None:
        self.session.follow()  # the engine appended the re-score's events: index them, then redraw
        if self.dimension is not None:
            self.post_message(Loaded("dimension", dimension_detail(self.session, self.user_id, self.system,
                                                                   self.dimension, self.judgment_layer)))

    def refocus(self) -> None:
        self.query_one(DetailLog).focus()

    # -- navigation ----------------------------------------------------------------------------
    def action_scroll(self, delta: int) -> None:
        log = self.query_one(DetailLog)
        log.scroll_to(y=max(0, log.scroll_y + delta * 3), animate=False)

    def action_next_dimension(self, delta: int) -> None:
        names = unit_dimensions(self.session, self.user_id, self.system)
        if names and self.dimension in names:
            self.dimension = names[(names.index(self.dimension) + delta) % len(names)]
            self.live = {}
            self._scroll_home = True
            self.reload()

    def action_layer(self) -> None:
        """The next judgment layer: the run's own (main), then each ``memprobe rescore --as NAME``."""
        if not judgment_layers(self.session):
            self.notify(NO_LAYERS, timeout=5)
            return
        self.judgment_layer = next_layer(self.session, self.judgment_layer)
        self.why = None
        self.reload()

    def action_switch_system(self) -> None:
        names = systems(self.session)
        if len(names) > 1:
            self.system = names[(names.index(self.system) + 1) % len(names)] if self.system in names else names[0]
            self.live = {}
            self._scroll_home = True
            self.reload()

    def action_task(self) -> None:
        if self.detail is not None and self.detail.episode is not None:
            open_transcript(self.app, self.session, self.user_id, self.system,
                                     (self.detail.episode.task_index, 0))

    def action_evidence(self) -> None:
        if self.detail is None:
            return
        if not self.detail.evidence_turns:
            probe = "the stage-1 evidence" if self.detail.evidence else "the target's words"
            self.notify(f"No turn of this task's dialogue carries {probe}, so there is no turn to open; "
                        "t opens the task's transcript.")
            return
        first = self.detail.evidence_turns[0]
        open_transcript(self.app, self.session, self.user_id, self.system, (first.task_index, first.turn))

    def action_judge_call(self) -> None:
        if self.detail is None:
            return
        call = judge_call(self.detail)
        if call is not None:
            self.nav.open_llm_call(self.session, call[0])
        else:
            self.notify("No LLM call is recorded for this dimension.")

    def action_memory(self) -> None:
        """The store the slot-filler read, at its fill, with each item's rank in retrieve's top-k."""
        d = self.detail
        if d is None or d.fill_seq is None:
            self.notify("No slot-fill is recorded for this dimension yet: there is no store at fill time to show.")
            return
        top_k = next((m for m in d.modes.values() if m.mode != "dump_all" and m.retrieved), None)
        marks = {item_id: f"k{rank}" for rank, (item_id, _, _) in enumerate(top_k.retrieved, 1)} if top_k else {}
        context = (f"at the slot-fill of {d.dimension} (seq {d.fill_seq}): dump_all read every item"
                   + ("; kN = rank in retrieve's top-k" if marks else ""))
        from memprobe_tui.screens.memory import MemoryScreen  # a screen opened from here only

        self.app.push_screen(MemoryScreen(self.session, self.user_id, self.system, (d.fill_seq, d.fill_seq),
                                          read=marks, context=context))
