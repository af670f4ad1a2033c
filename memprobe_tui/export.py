"""Copy and export of what a screen shows: a prompt, a response, a transcript, a table.

A screen describes its current content as an :class:`ExportDoc` (Markdown text and a JSON value);
copying sends the Markdown to the terminal's clipboard with OSC 52 (Textual's
``App.copy_to_clipboard``: it works over SSH and inside tmux with ``set-clipboard on``), and
exporting writes ``<name>-<time>.md`` or ``.json`` to ``$MEMPROBE_EXPORT_DIR`` (default
``./memprobe-exports``). Nothing here imports Textual, so the formats are tested without an app.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

EXPORT_DIR_ENV = "MEMPROBE_EXPORT_DIR"


@dataclass(frozen=True)
class ExportDoc:
    """One exportable thing: ``name`` (for the file name), a Markdown rendering and a JSON value."""

    name: str
    markdown: str
    data: object


def export_dir() -> Path:
    return Path(os.environ.get(EXPORT_DIR_ENV) or "memprobe-exports")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")[:80] or "export"


def write_export(doc: ExportDoc, fmt: str, directory: Path | None = None, now: dt.datetime | None = None) -> Path:
    """Write ``doc`` as ``fmt`` ("md" or "json"); returns the file. Raises OSError when the folder
    cannot be written (the caller names it in its message)."""
    folder = directory or export_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stamp = (now or dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    path = folder / f"{_slug(doc.name)}-{stamp}.{fmt}"
    if fmt == "md":
        path.write_text(doc.markdown if doc.markdown.endswith("\n") else doc.markdown + "\n", encoding="utf-8")
    else:
        path.write_bytes(orjson.dumps(doc.data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS,
                                      default=str) + b"\n")
    return path


def text_doc(name: str, title: str, text: str) -> ExportDoc:
    """A plain text (a prompt, a response, a detail pane) as Markdown and JSON."""
    return ExportDoc(name, f"# {title}\n\n{text}\n", {"title": title, "text": text})


def table_doc(name: str, title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> ExportDoc:
    """A table as a Markdown table and as JSON records (one object per row, keyed by column)."""
    def cell(value: str) -> str:
        return value.replace("|", "\\|").replace("\n", " ")

    lines = [f"# {title}", "", "| " + " | ".join(map(cell, columns)) + " |",
             "| " + " | ".join("---" for _ in columns) + " |"]
    lines += ["| " + " | ".join(cell(str(v)) for v in row) + " |" for row in rows]
    records = [dict(zip(columns, map(str, row))) for row in rows]
    return ExportDoc(name, "\n".join(lines) + "\n", {"title": title, "columns": list(columns), "rows": records})


def transcript_doc(name: str, title: str, turns: Sequence[tuple[str, str, str]]) -> ExportDoc:
    """A transcript from (where, role, text) triples: one Markdown section per message."""
    lines = [f"# {title}", ""]
    for where, role, text in turns:
        lines += [f"## {where} · {role}", "", text, ""]
    data = {"title": title, "messages": [{"where": w, "role": r, "text": t} for w, r, t in turns]}
    return ExportDoc(name, "\n".join(lines), data)
