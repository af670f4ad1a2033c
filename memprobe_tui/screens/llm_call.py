"""LLM call inspector: the full request (long messages resolved from payloads), response, model,
parameters, tokens, latency, cache hit, retries and repairs of one recorded call."""

from __future__ import annotations

from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from memprobe_engine.replay import LLMCallView, ReplaySession, llm_call_view
from memprobe_tui.export import ExportDoc
from memprobe_tui.messages import Loaded
from memprobe_tui.render import call_detail
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.widgets.detail_log import DetailLog


class LLMCallScreen(ReplayScreen):
    """One call by seq; ``[``/``]`` move to the previous/next LLM call of the recording."""

    DEFAULT_CSS = """
    LLMCallScreen DetailLog { height: 1fr; }
    """

    HELP = """\
**One LLM call** as recorded: role (which part of the pipeline asked), model and backend, tokens
(prompt + completion), finish reason (`stop`: the model ended; `length`: cut off by max_tokens —
flagged ⚠ above the response, also when the backend gave no reason but the whole budget was used),
time and latency, whether the response cache answered it, the request hash (the cache and replay
key), sampling parameters, retries (transient failures, with the wait before each new attempt) and
structured-output repairs. Then the full request — every message, long ones resolved from
payloads.jsonl — the response schema, the response and its parsed value.

The text pane has focus: PageDown/space, End or G reach the end of a long prompt; `/` searches it;
Enter or z shows it full screen; `[`/`]` move to the previous/next call of the recording.
`y` copies the whole call, `Y` only the response; `w`/`W` export it.
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "scroll(1)", "Down", show=False, id="call.down"),
        Binding("k,up", "scroll(-1)", "Up", show=False, id="call.up"),
        Binding("Y", "copy_response", "Copy response", show=False, id="call.copy_response"),
        Binding("right_square_bracket", "neighbour(1)", "Call", key_display="[/]", id="call.next"),
        Binding("left_square_bracket", "neighbour(-1)", "Prev call", show=False, id="call.prev"),
    ]

    def __init__(self, session: ReplaySession, seq: int) -> None:
        super().__init__(session)
        self.session: ReplaySession = session
        self.seq = seq
        self.view: LLMCallView | None = None

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield DetailLog(id="call")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        super().reload()
        self.set_title(f"LLM call #{self.seq} · loading…")
        self._load(self.seq)

    @work(thread=True, exclusive=True, group="load", exit_on_error=False, name="LLM call")
    def _load(self, seq: int) -> None:
        # Resolving payloads may index payloads.jsonl on first use: keep it off the UI thread.
        self.post_message(Loaded("call", llm_call_view(self.session, seq)))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        view: LLMCallView | None = message.data
        log = self.query_one(DetailLog)
        if view is None:
            self.set_title(f"seq {self.seq} is not an LLM call")
            log.show([])
            return
        self.seq = view.seq
        self.view = view
        e = view.event
        self.set_title(f"LLM call #{view.seq} · {e.role} · {e.user_id or '-'} × {e.system or '-'}"
                       f"{' · ' + e.dimension if e.dimension else ''}")
        log.show(call_detail(view))
        log.focus()

    def action_copy_response(self) -> None:
        if self.view is None:
            return
        text = self.view.event.response_text or ""
        self.app.copy_to_clipboard(text)
        self.notify(f"Copied the response ({len(text):,} characters) to the clipboard (OSC 52).", timeout=5)

    def export_document(self) -> ExportDoc | None:
        if self.view is None:
            return None
        e = self.view.event
        md = [f"# LLM call #{self.view.seq} · {e.role} · {e.model}", ""]
        for message in self.view.messages:
            md += [f"## {message.role}", "", message.content, ""]
        md += ["## response", "", e.response_text or "", ""]
        data = {"seq": self.view.seq, "event": e.model_dump(mode="json"),
                "messages": [{"role": m.role, "content": m.content} for m in self.view.messages],
                "schema": self.view.schema}
        return ExportDoc(self.export_name(f"call-{self.view.seq}"), "\n".join(md), data)

    def action_scroll(self, delta: int) -> None:
        log = self.query_one(DetailLog)
        log.scroll_to(y=max(0, log.scroll_y + delta * 3), animate=False)

    def action_neighbour(self, delta: int) -> None:
        line = self.session.line_of_seq(self.seq)
        if line is None:
            return
        step = 1 if delta > 0 else -1
        probe = line + step
        while 0 <= probe < len(self.session):  # byte test: no parse until the call is found
            if b'"kind":"llm_call"' in self.session.raw(probe):
                event = self.session.event_or_none(probe)
                if event is not None:
                    self.seq = event.seq
                    self.reload()
                return
            probe += step
