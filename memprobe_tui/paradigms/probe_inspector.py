"""Probe inspector: one probe of one episode under one system — the question and the structured gold
beside the reader's structured answer, the score with its sub-scores and reasons (the original beside
the latest re-score), the memory the reader saw, the reader's LLM call — and the live re-run.

``r`` asks for a reader model (prefilled with the configured one), then an exclusive async worker
awaits the engine's probe re-run (``memprobe_engine.paradigms.rerun``) with a sink that turns
its output into messages: the reply streams into the re-run panel, the new answer and score appear
beside the originals, and when it ends the screen re-reads the recording, where the engine appended
them (a ``probe_score`` with ``rescore_of``). Escape cancels a running re-run.
"""

from __future__ import annotations

from typing import cast, TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input

from memprobe_engine.paradigms.read.ingest import store_unit
from memprobe_engine.paradigms.read.probe import ProbeDetail, probe_detail
from memprobe_engine.paradigms.read.queries import episode_spans, episode_steps, score_layers
from memprobe_engine.replay import ReplaySession
from memprobe_engine.replay.queries import step_seq_range
from memprobe_engine.llm.call_progress import CallProgress
from memprobe_tui.layers import layer_title, next_layer
from memprobe_tui.messages import Loaded, RescoreProgress, RescoreText
from memprobe_tui.paradigms.render import (
    answer_lines,
    fmt_score,
    gold_lines,
    memory_lines,
    score_lines,
)
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.screens.rerun_screen import RerunScreen
from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_tui.widgets.rerun_panel import RerunPanel

if TYPE_CHECKING:
    from memprobe_engine.paradigms.rerun import ProbeRerunFunction, ProbeRerunHook, ProbeRerunRequest


#: The name the app's live hooks hold the probe re-run under.
PROBE_RERUN = "probe_rerun"
#: What ``L`` says on a recording with only the run's own scores (here and on the overview).
NO_LAYERS = ("This recording holds only the run's own scores (main); `memprobe reader-ablation REC --reader SPEC` "
             "adds a named layer (another reader's answers, scored) to compare them with.")


class ProbeRerunAnswer(Message):
    """A running probe re-run got the reader's answer (or its execution error)."""

    def __init__(self, answer: dict[str, Any] | None, error: str | None) -> None:
        super().__init__()
        self.answer, self.error = answer, error


class ProbeRerunScore(Message):
    """A running probe re-run scored the new answer (the score is already in the recording)."""

    def __init__(self, score: float, subscores: dict[str, float], reason: str, excluded: bool) -> None:
        super().__init__()
        self.score, self.subscores, self.reason, self.excluded = score, subscores, reason, excluded


class ProbeSink:
    """A :class:`memprobe_engine.paradigms.rerun.ProbeRerunSink` that posts to a screen."""

    def __init__(self, screen: ReplayScreen) -> None:
        self._post = screen.post_message

    def text(self, piece: str) -> None:
        self._post(RescoreText(piece, stage="reader"))

    def note(self, message: str) -> None:
        self._post(RescoreText(message, note=True))

    def answer(self, answer: dict[str, Any] | None, error: str | None) -> None:
        self._post(ProbeRerunAnswer(answer, error))

    def score(self, score: float, subscores: dict[str, float], reason: str, excluded: bool) -> None:
        self._post(ProbeRerunScore(score, subscores, reason, excluded))

    def progress(self, progress: CallProgress) -> None:
        self._post(RescoreProgress(progress))


class ProbeScreen(RerunScreen):
    """``probe_index`` is the probe's position in the episode (0-based)."""

    HELP = """\
One **probe** of a paradigm episode under one memory system.

- **gold** (left): the question's expected behaviour, the gold answer and the structured gold fields
  this probe type is scored on. **answer** (right): the reader's structured JSON answer.
- **score**: the rule scorer's verdict, 0–1, with its sub-scores (conflict: value / source / status /
  applicability; temporal: direction / trigger / old value) and the reason. An execution error is
  *excluded* from denominators, never scored as wrong. A re-score shows beside the original.
- **memory the reader saw**: the items the system's search returned for this question (or the
  sessions a RAG baseline picked; full context: the whole episode).

`r` re-runs the reader and the scorer on this probe with a model you choose (the same prompt the
reader saw, sent again; the memory system is not re-run); the reply streams below and the new score
is appended to the recording; until the reply streams, a line says what the call does (the embedded
model starting, the prompt evaluated so far). Esc cancels a running re-run. `c` opens the reader's LLM call, `m` the
store the reader searched, `[`/`]` the other probes, `s` the same probe under the next system, `L` the
next score layer (the run's own, `main`, then each named one: `memprobe reader-ablation`'s
`reader:SPEC`, a scoring mode's `scoring:corrected`): that layer's answer, score and reader call; a
re-run re-scores the run's own answer, so it shows `main`.
"""

    DEFAULT_CSS = """
    ProbeScreen #sides { height: 45%; }
    ProbeScreen #gold { width: 1fr; border-top: none; border-right: solid $primary 40%; }
    ProbeScreen #answer { width: 1fr; border-top: none; }
    ProbeScreen #scores { height: 1fr; }
    ProbeScreen.rerunning #sides { height: 30%; }
    ProbeScreen RerunPanel { height: 8; }
    ProbeScreen #reader-model { display: none; height: 3; }
    ProbeScreen #reader-model.shown { display: block; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "rerun", "Re-run", id="probe.rerun"),
        Binding("c", "call", "Call", id="probe.call"),
        Binding("m", "memory", "Memory", id="probe.memory"),
        Binding("right_square_bracket", "next_probe(1)", "Probe", key_display="[/]", id="probe.next"),
        Binding("left_square_bracket", "next_probe(-1)", "Prev probe", show=False, id="probe.prev"),
        Binding("s", "switch_system", "System", id="probe.system"),
        Binding("L", "layer", "Scores", show=False, id="probe.layer"),  # named layers: reader-ablation
    ]
    MODEL_BOX = "reader-model"

    def __init__(self, session: ReplaySession, episode_id: str, system: str, probe_index: int, *,
                 judgment_layer: str | None = None) -> None:
        super().__init__(session)
        self.session: ReplaySession = session
        self.episode_id, self.system, self.probe_index = episode_id, system, probe_index
        #: The score layer shown (None: the run's own, ``main``; ``L`` cycles the named ones).
        self.judgment_layer = judgment_layer
        self.named_layers: list[str] = []
        self.detail: ProbeDetail | None = None
        self.live: dict[str, Any] = {}
        self._default: ProbeRerunHook | None = None

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        with Horizontal(id="sides"):
            yield DetailLog(id="gold")
            yield DetailLog(id="answer")
        yield DetailLog(id="scores")
        yield Input(placeholder="reader model spec, e.g. local:fast or openai:gpt-4o-mini (Enter runs, Esc cancels)",
                    id="reader-model", disabled=True)  # enabled while shown: never takes focus hidden
        yield RerunPanel(id="rerun")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        self.reload()
        self._warm_up()

    @work(thread=True, exclusive=True, group="warm-up", exit_on_error=False, name="load the re-run")
    def _warm_up(self) -> None:
        # The re-run module pulls in the reader, the scorer and the chat client: import them off the
        # UI thread now, so pressing r answers at once even on a loaded machine.
        import memprobe_engine.paradigms.rerun  # noqa: F401

    def reload(self) -> None:
        super().reload()
        self.set_title(f"{self.episode_id} × {self.system} · probe {self.probe_index + 1} · loading…")
        self._load(self.episode_id, self.system, self.probe_index, self.judgment_layer)

    @work(thread=True, exclusive=True, group="load", exit_on_error=False, name="probe detail")
    def _load(self, episode_id: str, system: str, probe_index: int, layer: str | None) -> None:
        self.named_layers = score_layers(self.session)
        self.post_message(Loaded("probe", probe_detail(self.session, episode_id, system, probe_index, layer)))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        detail: ProbeDetail = message.data
        if (detail.episode_id, detail.system, detail.probe_index, detail.layer) != \
                (self.episode_id, self.system, self.probe_index, self.judgment_layer):
            return  # a load for the probe shown before a key press moved on
        self.detail = detail
        if message.what == "picked up":
            self.live = {}  # the re-run is in the recording now: the re-score line shows it
        self._draw()

    def _draw(self) -> None:
        d = self.detail
        if d is None:
            return
        current = d.cell.value if d.cell is not None else None
        latest = f" · re-scored {d.cell.rescores}×" if d.cell is not None and d.cell.rescores else ""
        self.set_title(layer_title(self.named_layers, d.layer, f"{d.episode_id} × {d.system} · probe {d.probe_index + 1}/"
                                   f"{d.probe_count} · {d.probe_type} · score {fmt_score(current)}{latest}", "scores"))
        question = d.gold.question if d.gold is not None else (d.answer.question if d.answer is not None else "")
        self.query_one("#gold", DetailLog).show([Text(question, style="bold"), *gold_lines(d)])
        self.query_one("#answer", DetailLog).show(answer_lines(d.answer))
        log = self.query_one("#scores", DetailLog)
        offset = log.scroll_offset
        log.show([*score_lines(d, self.live or None), *memory_lines(d)])
        log.scroll_to(offset.x, offset.y, animate=False)

    # -- re-run --------------------------------------------------------------------------------
    def _hook(self) -> ProbeRerunHook:
        """The app's re-run (``memprobe replay`` builds it from its --model/--config), else the default."""
        live: dict[str, object] = getattr(self.app, "live", {})
        hook = cast("ProbeRerunHook | None", live.get(PROBE_RERUN)) or self._default
        if hook is None:  # imported on first use: it loads the reader and the scorer
            from memprobe_engine.paradigms.rerun import default_hook

            hook = self._default = default_hook()
        return hook

    def action_rerun(self) -> None:
        if self.rerun_running() or self.detail is None:
            return
        if self.detail.answer is not None and self.detail.answer.llm_call_seq is None:
            self.notify(f"This answer came from the {self.detail.answer.input_protocol} input protocol without a "
                        "reader call: there is no reader to re-run.", severity="warning")
            return
        self.ask_model(lambda: self._hook().default_reader)

    @on(Input.Submitted, "#reader-model")
    def _model_chosen(self, event: Input.Submitted) -> None:
        self.close_model_box()
        spec = event.value.strip()
        hook = self._hook()
        from memprobe_engine.paradigms.rerun import (
            ProbeRerunRequest,  # lazily: it loads the reader
        )

        self.live = {}
        if self.judgment_layer is not None:
            # The re-run answers and scores the run's own probe again (no layer): show main, where it lands.
            self.judgment_layer = None
            self.reload()
        self.add_class("rerunning")  # room for the panel: the gold and answer panes give up some height
        self.query_one(RerunPanel).start(f"re-run probe {self.probe_index + 1} with reader {spec or hook.default_reader}")
        self._rerun(hook.run, ProbeRerunRequest(self.session.directory, self.episode_id, self.system, self.probe_index,
                                                spec or None))

    @work(exclusive=True, group="rerun", exit_on_error=False, name="probe re-run")
    async def _rerun(self, run: ProbeRerunFunction, request: ProbeRerunRequest) -> None:
        await self.reported(lambda: run(request, ProbeSink(self)))

    @on(ProbeRerunAnswer)
    def _rerun_answer(self, message: ProbeRerunAnswer) -> None:
        self.live.update(answer=message.answer, error=message.error)
        self.query_one(RerunPanel).line("answer: " + ("error: " + message.error if message.error else "parsed"))
        self._draw()

    @on(ProbeRerunScore)
    def _rerun_score(self, message: ProbeRerunScore) -> None:
        self.live.update(score=message.score, subscores=message.subscores, reason=message.reason,
                         excluded=message.excluded, exclusion_reason=message.reason if message.excluded else None)
        shown = "excluded" if message.excluded else fmt_score(message.score)
        self.query_one(RerunPanel).line(f"new score: {shown} — {message.reason}")
        self._draw()

    def rerun_ended(self, outcome: str) -> None:
        done = outcome == "done"
        self.query_one(RerunPanel).status(f"re-run {outcome}" + (" — answer and score appended to the recording"
                                                                  if done else ""))
        if done:
            self._pick_up()

    @work(thread=True, exclusive=True, group="follow", exit_on_error=False, name="read re-run")
    def _pick_up(self) -> None:
        self.session.follow()  # the engine appended the re-run's events: index them, then redraw
        self.post_message(Loaded("picked up", probe_detail(self.session, self.episode_id, self.system,
                                                           self.probe_index, self.judgment_layer)))

    # -- navigation ----------------------------------------------------------------------------
    def _switch(self, probe_index: int | None = None, system: str | None = None) -> None:
        self.probe_index = self.probe_index if probe_index is None else probe_index
        self.system = system or self.system
        self.live = {}
        self.reload()

    def action_layer(self) -> None:
        """The next score layer: the run's own (main), then each named one the recording holds."""
        if self.rerun_running():
            return
        if not self.named_layers:
            self.notify(NO_LAYERS, timeout=5)
            return
        self.judgment_layer = next_layer(self.named_layers, self.judgment_layer)
        self.live = {}
        self.reload()

    def action_next_probe(self, delta: int) -> None:
        count = self.detail.probe_count if self.detail is not None else 0
        if count > 1 and not self.rerun_running():
            self._switch(probe_index=(self.probe_index + delta) % count)

    def action_switch_system(self) -> None:
        names = list(dict.fromkeys(str(s.attrs.get("system") or s.system) for s in episode_spans(self.session)
                                   if s.attrs.get("episode_id") == self.episode_id))
        if len(names) > 1 and not self.rerun_running():
            self._switch(system=names[(names.index(self.system) + 1) % len(names)] if self.system in names else names[0])

    def action_call(self) -> None:
        if self.detail is not None and self.detail.call_seq is not None:
            self.nav.open_llm_call(self.session, self.detail.call_seq)
        else:
            self.notify("No reader LLM call is recorded for this probe (a heuristic answers without one).")

    def action_memory(self) -> None:
        steps = episode_steps(self.session, self.episode_id, self.system)
        probe = next((p for p in (steps.probes if steps else []) if p.probe_index == self.probe_index), None)
        if steps is None or probe is None:
            return
        first, _ = step_seq_range(self.session, probe.step)
        self.nav.open_memory(self.session, store_unit(steps), self.system, (first - 1, first))
