"""``memprobe export html``: one self-contained HTML page of a recording, to open in any browser or
print — no script, no font, no stylesheet or image fetched, no server.

The page holds the run (id, suite, systems, model per role), the report's tables exactly as
``memprobe report`` prints them (its own renderers, captured as tables instead of terminal text),
an index of every case with its current score, and the why-chain of each ``--case``
(``html_case.py``). A Content-Security-Policy meta tag forbids every script and every network
request, so even a recorded text that slipped past escaping could not run or fetch anything.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console, RenderableType
from rich.errors import MarkupError
from rich.table import Table
from rich.text import Text

from memprobe_engine.errors import ConfigError
from memprobe_engine.exports.files import write_file
from memprobe_engine.exports.html_case import case_section, esc, probe_section
from memprobe_engine.exports.registry import ExportJob, ExportResult, default_out
from memprobe_engine.replay.session import ReplaySession

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:70em;padding:0 1em;color:#111}
h1{font-size:1.5em}h2{border-bottom:1px solid #999;margin-top:2em}h3{margin-top:1.5em;background:#eef;padding:.2em .4em}
table{border-collapse:collapse;margin:.5em 0 1em}th,td{border:1px solid #bbb;padding:.15em .5em;vertical-align:top}
th{background:#f3f3f3}td.num,span.num{font-variant-numeric:tabular-nums;text-align:right}
caption{text-align:left;font-weight:bold;padding:.3em 0}.note,.why{color:#555;font-size:.9em}
.msg{margin:.3em 0;padding:.3em .5em;border-left:3px solid #ccc}.msg.assistant{border-color:#69c}
.msg.user{border-color:#9c6}.msg.evidence{background:#fff6d5;border-color:#e0a800}.who{font-size:.85em;color:#555}
.text,.reason{white-space:pre-wrap}.reason{color:#333;margin-left:1em}
tr.added td{background:#e9f7e9}tr.updated td{background:#fff6d5}tr.deleted td{background:#fde8e8;text-decoration:line-through}
.id{font-family:ui-monospace,monospace;font-size:.9em}.mark{text-align:center;font-weight:bold}
.label{font-weight:bold}.flag{color:#a00}.mode{border:1px solid #ddd;padding:.2em .8em;margin:.6em 0}
@media print{body{max-width:none;margin:0}.case{break-before:page}h2,h3,h4{break-after:avoid}
tr,.msg{break-inside:avoid}a{color:inherit;text-decoration:none}}
"""
POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; form-action 'none'"


class _Capture(Console):
    """A console that keeps what the report's printers print (tables and lines) instead of drawing it."""

    def __init__(self) -> None:
        super().__init__(file=io.StringIO(), width=100)
        self.printed: list[RenderableType] = []

    def print(self, *objects: RenderableType, **kwargs: object) -> None:
        self.printed.extend(objects)


def _plain(cell: RenderableType) -> str:
    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        try:
            return Text.from_markup(cell).plain
        except MarkupError:
            return cell
    return str(cell)


def table_html(table: Table, title: str | None = None) -> str:
    """A rich table as an HTML table: the same headings and cell texts the terminal shows."""
    columns = table.columns
    cells = [list(c.cells) for c in columns]
    rows = max((len(c) for c in cells), default=0)
    name = title if title is not None else (_plain(table.title) if table.title else "")
    body = "".join("<tr>" + "".join(
        f"<td{' class=num' if i and c.justify == 'right' else ''}>{esc(_plain(cells[i][r]))}</td>"
        for i, c in enumerate(columns)) + "</tr>" for r in range(rows))
    head = "".join(f"<th>{esc(_plain(c.header))}</th>" for c in columns)
    return f"<table><caption>{esc(name)}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _printed_html(printed: list[RenderableType]) -> str:
    out: list[str] = []
    pending: str | None = None  # protocol B prints a table's title on its own line just before it
    for item in printed:
        if isinstance(item, Table):
            out.append(table_html(item, pending))
            pending = None
        elif isinstance(item, (str, Text)) and _plain(item).strip():
            if pending is not None:
                out.append(f"<p>{esc(pending)}</p>")
            pending = _plain(item)
    if pending is not None:
        out.append(f"<p>{esc(pending)}</p>")
    return "".join(out)


@dataclass(frozen=True)
class _Case:
    """A case of the index: (unit, dimension or "", system, mode or probe, score, what it says)."""

    unit: str
    dimension: str
    system: str
    mode: str
    score: float | None
    note: str


def _tables_a(path: Path) -> tuple[str, list[_Case]]:
    from memprobe_engine.recovery.read.frames import load_frames
    from memprobe_engine.recovery.read.render import print_tables
    from memprobe_engine.recovery.read.tables import build_tables

    frames = load_frames([path])
    capture = _Capture()
    print_tables(build_tables(frames), capture)
    labels = {(r["user_id"], r["system"], r["dimension"], r["mode"]): str(r["label"])
              for r in frames.attribution.to_dict("records")}
    cases = [_Case(str(r["user_id"]), str(r["dimension"]), str(r["system"]), str(r["mode"]),
                   None if r["score"] != r["score"] else float(r["score"]),
                   labels.get((r["user_id"], r["system"], r["dimension"], r["mode"]), str(r["excluded"] or "")))
             for r in frames.scores.to_dict("records")]
    return _printed_html(capture.printed), cases


def _tables_b(path: Path) -> tuple[str, list[_Case]]:
    from memprobe_engine.paradigms.read.frames import load_paradigm_frames
    from memprobe_engine.paradigms.read.tables import DEFAULT_TABLES, build_paradigm_tables, parse_paradigm_tables
    from memprobe_engine.paradigms.read.tables import print_paradigm_tables

    probes = load_paradigm_frames([path]).probes
    capture = _Capture()
    print_paradigm_tables(build_paradigm_tables(probes, parse_paradigm_tables(DEFAULT_TABLES)), capture)
    cases = [_Case(str(r["episode_id"]), "", str(r["system"]), f"{r['probe_index']} {r['probe_type']}",
                   None if r["excluded"] else float(r["score"]), str(r["reason"] or ""))
             for r in probes.to_dict("records")]
    return _printed_html(capture.printed), cases


def _index(cases: list[_Case], shown: set[tuple[str, str, str]], paradigm: bool) -> str:
    head = ("<th>episode</th><th>system</th><th>probe</th><th>score</th><th>reason</th>" if paradigm else
            "<th>user</th><th>dimension</th><th>system</th><th>mode</th><th>score</th><th>attribution</th>")
    rows = []
    for c in cases:
        key = (c.unit, c.dimension, c.system)
        name = esc(c.dimension or c.unit)
        if key in shown:
            name = f"<a href='#{esc('-'.join(['case', c.unit, c.system] + ([c.dimension] if c.dimension else [])))}'>" \
                   f"{name}</a>"
        score = "–" if c.score is None else f"{c.score:.2f}"
        cells = ([name, esc(c.system), esc(c.mode)] if paradigm else [esc(c.unit), name, esc(c.system), esc(c.mode)])
        rows.append("<tr>" + "".join(f"<td>{v}</td>" for v in cells) + f"<td class=num>{score}</td>"
                    f"<td>{esc(c.note)}</td></tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _pick(spec: str, cases: list[_Case], paradigm: bool) -> list[tuple[str, str, str]]:
    """The (unit, dimension, system) keys one ``--case`` names; ConfigError naming the flag otherwise."""
    parts = spec.split(":")
    known = sorted({(c.unit, c.dimension, c.system) for c in cases})
    if paradigm:
        unit, dimension, system = parts[0], "", (parts[1] if len(parts) > 1 else None)
        form, example = "EPISODE or EPISODE:SYSTEM", f"{known[0][0]}" if known else "PILOT-01A"
    else:
        unit, dimension = parts[0], parts[1] if len(parts) > 1 else ""
        system = parts[2] if len(parts) > 2 else None
        form, example = "USER:DIM or USER:DIM:SYSTEM", f"{known[0][0]}:{known[0][1]}" if known else "user_001:dim"
    picked = [k for k in known if k[0] == unit and k[1] == dimension and (system is None or k[2] == system)]
    if not picked or len(parts) > (2 if paradigm else 3) or (not paradigm and not dimension):
        raise ConfigError(f"--case {spec}: the recording has no such case (give {form}, e.g. --case {example}; "
                          f"{len(known)} case(s) are listed in the page's index without --case).")
    return picked


def _case_a(session: ReplaySession, user: str, dimension: str, system: str) -> str:
    from memprobe_engine.errors import MemProbeError
    from memprobe_engine.recovery.read.dimension import dimension_detail
    from memprobe_engine.replay.memory_view import store_view

    detail = dimension_detail(session, user, system, dimension)
    view = None
    if detail.fill_seq is not None:
        first = detail.episode.steps[0].first_line if detail.episode and detail.episode.steps else None
        start = session.event_or_none(first) if first is not None else None
        try:
            view = store_view(session, user, system, detail.fill_seq, (start.seq - 1) if start is not None else -1)
        except MemProbeError:
            view = None
    return case_section(session, detail, view)


def _case_b(session: ReplaySession, episode: str, system: str) -> str:
    from memprobe_engine.events.paradigms import ProbeAnswer, ProbeScore

    answers: dict[int, ProbeAnswer] = {}
    scores: dict[int, ProbeScore] = {}
    for event in session.reader.iter_of(ProbeAnswer, ProbeScore):
        if event.layer is not None or event.system != system:
            continue
        if isinstance(event, ProbeAnswer) and event.episode_id == episode:
            answers[event.probe_index] = event
        elif isinstance(event, ProbeScore) and event.episode_id == episode:
            scores[event.probe_index] = event
    return probe_section(episode, system, [answers[i] for i in sorted(answers)], scores)


def page(path: Path, case_specs: tuple[str, ...]) -> str:
    """The whole page of the recording at ``path``."""
    session = ReplaySession.open(path)
    try:
        session.build_index()
        header = session.header
        paradigm = header.suite == "paradigms"
        tables, cases = (_tables_b if paradigm else _tables_a)(path)
        picked = list(dict.fromkeys(k for spec in case_specs for k in _pick(spec, cases, paradigm)))
        sections = [(_case_b(session, unit, system) if paradigm else _case_a(session, unit, dimension, system))
                    for unit, dimension, system in picked]
        models = header.config.get("models")
        roles = models.get("models") if isinstance(models, dict) else None
        specs = "".join(f"<tr><td>{esc(role)}</td><td>{esc(spec.get('spec'))}</td></tr>"
                        for role, spec in (roles or {}).items() if isinstance(spec, dict))
        damage = session.damage_message()
    finally:
        session.close()
    title = f"MemProbe · {header.run_id}"
    run = (f"<table><tbody><tr><th>run</th><td>{esc(header.run_id)}</td></tr><tr><th>suite</th>"
           f"<td>{esc(header.suite)}</td></tr><tr><th>recording</th><td>{esc(path.resolve().name)}</td></tr>"
           f"<tr><th>systems</th><td>{esc(', '.join(map(str, header.config.get('systems') or [])))}</td></tr>"
           "</tbody></table>" + (f"<table><thead><tr><th>role</th><th>model</th></tr></thead><tbody>{specs}"
                                 "</tbody></table>" if specs else ""))
    warning = f"<p class='flag'>{esc(damage)}</p>" if damage else ""
    hint = "" if sections else ("<p class='note'>No case chosen: <code>memprobe export html REC --case "
                                f"{'EPISODE' if paradigm else 'USER:DIM'}</code> adds its why-chain.</p>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{POLICY}\">"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{esc(title)}</h1>{warning}{run}<h2>Tables</h2>{tables}"
            f"<h2>Cases</h2>{hint}{_index(cases, set(picked), paradigm)}"
            + (f"<h2>Why-chains</h2>{''.join(sections)}" if sections else "")
            + "</body></html>\n")


def export_html(job: ExportJob) -> ExportResult:
    """The registry's ``html`` writer."""
    if len(job.recordings) != 1:
        raise ConfigError("export html takes one recording.")
    path = Path(job.recordings[0])
    text = page(path, job.cases)
    out = write_file(job.out if job.out is not None else default_out(job, ".html"), text.encode("utf-8"))
    size = out.stat().st_size
    return ExportResult([out], [f"wrote {out} ({size / 1024:,.0f} KiB, {len(job.cases)} case(s)); open it in "
                                f"any browser, no network needed"])
