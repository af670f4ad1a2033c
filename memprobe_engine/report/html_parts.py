"""The pieces of ``memprobe export html`` every protocol's part of the page is built from.

The page (``html_page.py``) owns the frame: the run, the models, the style and the security policy.
What a protocol puts on it — its report tables, the index of its cases, the why-chain of each
``--case`` — it builds through :meth:`~memprobe_engine.protocol_spec.ProtocolSpec.html_sections`
with these helpers, and returns as :class:`HtmlSections`. Every recorded text is untrusted (a user's
words, a model's output, item fields) and goes through :func:`esc`, the only way text enters the page.
"""

from __future__ import annotations

import html
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rich.console import Console, RenderableType
from rich.errors import MarkupError
from rich.table import Table
from rich.text import Text

from memprobe_engine.errors import ConfigError

#: Longest item text shown in full; longer ones are cut with a note (the recording has all of it).
ITEM_CHARS = 1200


@dataclass(frozen=True)
class HtmlSections:
    """A protocol's part of the page: HTML fragments, every recorded text already escaped."""

    #: The report's tables, as ``memprobe report`` prints them.
    tables: str
    #: The index of every case with its current score, linking the cases shown below.
    index: str
    #: One why-chain section per chosen case, in the order asked.
    chains: list[str] = field(default_factory=list)
    #: How ``--case`` names a case of this protocol (the page's hint when none is chosen).
    case_form: str = "CASE"


def esc(value: object) -> str:
    """``value`` as HTML text: every ``<``, ``&``, quote escaped."""
    return html.escape("" if value is None else str(value), quote=True)


def score_text(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def cut(text: str) -> str:
    """``text``, or its first :data:`ITEM_CHARS` characters and how many more there are."""
    return text if len(text) <= ITEM_CHARS else f"{text[:ITEM_CHARS]}… ({len(text) - ITEM_CHARS:,} more characters)"


def anchor(unit: str, system: str, dimension: str = "") -> str:
    """The id of a case's section (and the index's link to it)."""
    return "-".join(["case", unit, system] + ([dimension] if dimension else []))


class Capture(Console):
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


def printed_html(capture: Capture) -> str:
    """What a report printed into ``capture``: its tables as HTML tables, its lines as paragraphs (a line
    just before a table is that table's title)."""
    out: list[str] = []
    pending: str | None = None
    for item in capture.printed:
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
class IndexRow:
    """A case of the page's index: its unit, dimension (or ""), system, score and note, the cells it
    shows, and which of them links to its section when the case is shown."""

    unit: str
    dimension: str
    system: str
    score: float | None
    note: str
    #: The cells before the score, already escaped except the linked one.
    cells: tuple[str, ...]
    #: Which cell links to the section.
    link: int = 0


def case_index(head: Sequence[str], rows: Sequence[IndexRow], shown: set[tuple[str, str, str]]) -> str:
    """The index table: ``head`` (its column names, the last two for the score and the note), one row per
    case."""
    body = []
    for row in rows:
        cells = list(row.cells)
        if (row.unit, row.dimension, row.system) in shown:
            cells[row.link] = f"<a href='#{esc(anchor(row.unit, row.system, row.dimension))}'>{cells[row.link]}</a>"
        body.append("<tr>" + "".join(f"<td>{v}</td>" for v in cells) + f"<td class=num>{score_text(row.score)}</td>"
                    f"<td>{esc(row.note)}</td></tr>")
    return f"<table><thead><tr>{''.join(f'<th>{h}</th>' for h in head)}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def pick(specs: Sequence[str], known: Sequence[tuple[str, str, str]],
         parse: Callable[[str], tuple[str, str, str | None] | None], form: str, example: str) -> list[tuple[str, str, str]]:
    """The (unit, dimension, system) keys the ``--case`` values name, each once, in the order asked.
    ``parse`` reads one value as (unit, dimension, system or None: every system), or None when malformed;
    a value that names no case is one ConfigError giving ``form`` and ``example``."""
    ordered = sorted(set(known))
    picked: list[tuple[str, str, str]] = []
    for spec in specs:
        parsed = parse(spec)
        found = [] if parsed is None else [k for k in ordered if k[0] == parsed[0] and k[1] == parsed[1]
                                           and (parsed[2] is None or k[2] == parsed[2])]
        if not found:
            raise ConfigError(f"--case {spec}: the recording has no such case (give {form}, e.g. --case {example}; "
                              f"{len(ordered)} case(s) are listed in the page's index without --case).")
        picked.extend(found)
    return list(dict.fromkeys(picked))
