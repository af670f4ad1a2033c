"""``memprobe export html``: one self-contained HTML page of a recording, to open in any browser or
print — no script, no font, no stylesheet or image fetched, no server.

The page holds the run (id, suite, systems, model per role) and what the recording's protocol puts on
it through :meth:`~memprobe_engine.protocol_spec.ProtocolSpec.html_sections`: the report's tables
exactly as ``memprobe report`` prints them (its own renderers, captured as tables instead of terminal
text), an index of every case with its current score, and the why-chain of each ``--case``. The
pieces are ``html_parts.py``'s. A Content-Security-Policy meta tag forbids every script and every
network request, so even a recorded text that slipped past escaping could not run or fetch anything.
"""

from __future__ import annotations

from pathlib import Path

from memprobe_engine.errors import ConfigError
from memprobe_engine.exports.files import write_file
from memprobe_engine.report.html_parts import esc
from memprobe_engine.exports.job import ExportJob, ExportResult, default_out
from memprobe_engine.events.header_config import HeaderConfig

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


def page(path: Path, case_specs: tuple[str, ...]) -> str:
    """The whole page of the recording at ``path``."""
    from memprobe_engine.protocols import open_session, spec_of

    session = open_session(path)
    try:
        header = session.header
        protocol = spec_of(header)
        session.build_index()
        part = protocol.html_sections(session, case_specs)
        config = HeaderConfig.of(header)
        specs = "".join(f"<tr><td>{esc(role)}</td><td>{esc(entry.spec)}</td></tr>"
                        for role, entry in config.models.models.items())
        damage = session.damage_message()
    finally:
        session.close()
    title = f"MemProbe · {header.run_id}"
    run = (f"<table><tbody><tr><th>run</th><td>{esc(header.run_id)}</td></tr><tr><th>suite</th>"
           f"<td>{esc(header.suite)}</td></tr><tr><th>recording</th><td>{esc(path.resolve().name)}</td></tr>"
           f"<tr><th>systems</th><td>{esc(', '.join(config.systems))}</td></tr>"
           "</tbody></table>" + (f"<table><thead><tr><th>role</th><th>model</th></tr></thead><tbody>{specs}"
                                 "</tbody></table>" if specs else ""))
    warning = f"<p class='flag'>{esc(damage)}</p>" if damage else ""
    hint = "" if part.chains else ("<p class='note'>No case chosen: <code>memprobe export html REC --case "
                                   f"{esc(part.case_form)}</code> adds its why-chain.</p>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{POLICY}\">"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{esc(title)}</h1>{warning}{run}<h2>Tables</h2>{part.tables}"
            f"<h2>Cases</h2>{hint}{part.index}"
            + (f"<h2>Why-chains</h2>{''.join(part.chains)}" if part.chains else "")
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
