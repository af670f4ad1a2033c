"""Protocol B's part of ``memprobe export html``: the report's tables, the index of every probe, and
per ``--case EPISODE[:SYSTEM]`` the (episode, system)'s probes — the question, what the reader saw,
its answer and the rule score. Every recorded text goes through ``esc``.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from memprobe_engine.events.paradigms import ProbeAnswer, ProbeScore
from memprobe_engine.report.html_parts import (Capture, HtmlSections, IndexRow, anchor, case_index, cut, esc, pick,
                                                printed_html, score_text)
from memprobe_engine.replay.session import ReplaySession

#: The index's columns.
HEAD = ("episode", "system", "probe", "score", "reason")


def probe_section(episode: str, system: str, answers: list[ProbeAnswer], scores: dict[int, ProbeScore]) -> str:
    """One (episode, system): its probes, what the reader saw, answered and scored."""
    parts = [f"<section class='case' id='{esc(anchor(episode, system))}'><h3>{esc(episode)} × {esc(system)}</h3>"]
    for answer in answers:
        seen = "".join(f"<li><span class='id'>{esc(r.id)}</span> <span class='num'>{score_text(r.score)}</span> "
                       f"{esc(cut(r.text))}</li>" for r in answer.retrieved)
        text = answer.answer_text if answer.answer_text is not None else (
            orjson.dumps(answer.answer).decode() if answer.answer is not None else "")
        score = scores.get(answer.probe_index)
        verdict = (f"<p><b>Score</b>: <span class='num'>{score_text(score.score)}</span>"
                   f"{' excluded: ' + esc(score.exclusion_reason) if score.excluded else ''}</p>"
                   f"<p class='reason'>{esc(score.reason)}</p>") if score is not None else \
            "<p class='note'>not scored</p>"
        error = f"<p class='flag'>error: {esc(answer.error)}</p>" if answer.error else ""
        parts.append(f"<section class='mode'><h4>probe {answer.probe_index}: {esc(answer.probe_type)}</h4>"
                     f"<p><b>Question</b>: {esc(answer.question)}</p>"
                     + (f"<p><b>The reader saw</b> ({len(answer.retrieved)}):</p><ol class='topk'>{seen}</ol>"
                        if seen else "")
                     + f"<p><b>Answer</b>: <q>{esc(text)}</q></p>{error}{verdict}</section>")
    return "".join(parts) + "</section>"


def _chain(session: ReplaySession, episode: str, system: str) -> str:
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


def _parse(spec: str) -> tuple[str, str, str | None] | None:
    parts = spec.split(":")
    if len(parts) > 2:
        return None
    return parts[0], "", parts[1] if len(parts) > 1 else None


def html_sections(session: ReplaySession, cases: Sequence[str]) -> HtmlSections:
    """The page's protocol-B part for the recording open in ``session`` (its index built)."""
    from memprobe_engine.paradigms.read.frames import load_paradigm_frames
    from memprobe_engine.paradigms.read.tables import (DEFAULT_TABLES, build_paradigm_tables, parse_paradigm_tables,
                                                       print_paradigm_tables)

    probes = load_paradigm_frames([session.directory]).probes
    capture = Capture()
    print_paradigm_tables(build_paradigm_tables(probes, parse_paradigm_tables(DEFAULT_TABLES)), capture)
    rows = [IndexRow(str(r["episode_id"]), "", str(r["system"]), None if r["excluded"] else float(r["score"]),
                     str(r["reason"] or ""),
                     (esc(str(r["episode_id"])), esc(str(r["system"])), esc(f"{r['probe_index']} {r['probe_type']}")))
            for r in probes.to_dict("records")]
    known = sorted({(row.unit, row.dimension, row.system) for row in rows})
    picked = pick(cases, known, _parse, "EPISODE or EPISODE:SYSTEM", known[0][0] if known else "PILOT-01A")
    return HtmlSections(printed_html(capture), case_index(HEAD, rows, set(picked)),
                        [_chain(session, unit, system) for unit, _, system in picked], "EPISODE")
