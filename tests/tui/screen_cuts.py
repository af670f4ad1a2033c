"""Find text a screen cut without ``…``, from a snapshot SVG's text alone (issue 36: at 80×24 no cut
text lacks ``…`` on any screen of the snapshot suite).

An SVG of pytest-textual-snapshot is Rich's terminal export: one ``<text>`` element per styled run,
its column given by ``x`` (a cell is 12.2 px wide) and its row by the ``clip-path`` line. The rows are
rebuilt as plain strings, then three kinds of cut are looked for:

- **a word cut short**: a word of two letters or more (no digits: ids are not words) followed by a
  space, a border or the row's end that is no word of its own but the start of a longer one (``attribu`` of ``attribution``, ``authoritative_upda``). What a
  word is comes from a vocabulary: every word the recordings the screens show hold (events, payloads,
  header) and every word of the program's source (its labels, help and messages). A word the
  recording really ends with (a model's reply cut by its token cap) is a word of the vocabulary, so
  it is no cut of the screen's;
- **a word run into the screen's edge**: letters in the last column (a table wider than the screen,
  a line that does not wrap), where the word is not a whole word of the vocabulary;
- **a word ending in a hyphen**: the last text of a pane's line ending in a letter or digit then
  ``-`` (``of PILOT-``, the start of ``PILOT-01A``): text wraps at spaces only, so a line never ends
  inside a hyphenated id or word unless the screen cut it there;
- **a dangling separator**: the title line, or a line with nothing below it in its pane, ending in
  `` ·``, `` ×`` or `` →``: the rest was cut at a word boundary (a title wrapped onto a second line
  its one-line bar hides). A wrapped paragraph's line may end so: its next line goes on below it.

A cut that ends in ``…`` is no finding: that is how a cut must look.
"""

from __future__ import annotations

import ast
import html
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

#: Width of one terminal cell in Rich's SVG export (px).
CELL = 12.2
_TEXT = re.compile(r'<text class="terminal-(?:\d+-)?r\d+" x="([\d.]+)" y="[\d.]+" textLength="[\d.]+" '
                   r'clip-path="url\(#terminal-(?:\d+-)?line-(\d+)\)">([^<]*)</text>')
#: Pane borders, scroll bar thumbs and the footer's separator: what ends a pane's text on a row.
BORDERS = set("│┃▏▕▎▍▌▋▊▉█▁▂▃▄▅▆▇")
#: Separators that never end a complete line of this program's text.
DANGLING = ("·", "×", "→")
#: A word: letters, digits and ``_``, starting with a letter (``54159bac`` is no word ``bac``).
_WORD = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z][A-Za-z0-9_]*")
_TAIL = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z][A-Za-z0-9_]*$")
#: A token cut just after a hyphen: a letter or digit then ``-`` (``PILOT-``; ``-`` or ``--`` alone is
#: a rule or a placeholder, ``[-old-]`` a diff, neither ending so).
_HYPHEN_END = re.compile(r"[A-Za-z0-9]-$")


def svg_rows(svg: str, width: int) -> list[str]:
    """The screen's rows as plain text, each ``width`` cells (non-breaking spaces as spaces)."""
    cells: dict[int, dict[int, str]] = {}
    for x, line, text in _TEXT.findall(svg):
        row = cells.setdefault(int(line), {})
        column = round(float(x) / CELL)
        for offset, char in enumerate(html.unescape(text).replace("\xa0", " ").rstrip("\n")):
            row[column + offset] = char
    count = max(cells, default=-1) + 1
    return ["".join(cells.get(r, {}).get(c, " ") for c in range(width)) for r in range(count)]


def words_of(text: str) -> Iterator[str]:
    return (w.lower() for w in _WORD.findall(text))


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def recording_words(folder: Path) -> set[str]:
    """Every word of a recording's header, events and payloads (JSON strings decoded)."""
    words: set[str] = set()
    for path in sorted(folder.glob("*.json*")):
        lines = path.read_text(encoding="utf-8").splitlines() if path.suffix == ".jsonl" else [path.read_text("utf-8")]
        for line in lines:
            try:
                value = json.loads(line)
            except ValueError:
                words.update(words_of(line))  # a torn line: its words as they stand
                continue
            for text in _strings(value):
                words.update(words_of(text))
    return words


@lru_cache(maxsize=1)
def source_words(root: Path) -> frozenset[str]:
    """Every word of the program's string literals (labels, help texts, messages); names, comments
    and docstrings are left out (they are never on screen). One-letter words are left out too: a key's
    name (``l``) is no word a cut could not end in."""
    words: set[str] = set()
    for package in ("memprobe_tui", "memprobe_engine"):
        for path in (root / package).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                    words.update(words_of(node.value))
    return frozenset(w for w in words if len(w) > 1)


def vocabulary(root: Path, recordings: Iterable[Path]) -> set[str]:
    words = set(source_words(root))
    for folder in recordings:
        words |= recording_words(folder)
    return words


@dataclass(frozen=True)
class Cut:
    row: int
    column: int
    why: str
    line: str

    def __str__(self) -> str:
        return f"row {self.row}, column {self.column}: {self.why}\n    |{self.line}|"


def _prefix_of_a_word(word: str, vocab: set[str], longer: dict[str, bool]) -> bool:
    if word not in longer:
        longer[word] = any(w.startswith(word) and w != word for w in vocab)
    return longer[word]


def find_cuts(rows: list[str], vocab: set[str]) -> list[Cut]:
    """Every place of ``rows`` where text was cut without ``…`` (see the module's docstring)."""
    found: list[Cut] = []
    longer: dict[str, bool] = {}
    for r, line in enumerate(rows):
        width = len(line)
        # Pieces of the row between borders: each is the visible part of one pane's line.
        start = 0
        for end in [*(i for i, ch in enumerate(line) if ch in BORDERS), width]:
            piece = line[start:end]
            stripped = piece.rstrip()
            below = rows[r + 1][start:end] if r + 1 < len(rows) else ""
            if stripped.endswith(DANGLING) and stripped[:-1].endswith(" ") and (r == 0 or not below.strip()):
                found.append(Cut(r, start + len(stripped) - 1, f"ends in a dangling “{stripped[-1]}”", line))
            tokens = list(re.finditer(r"\S+", piece))
            for match in tokens:
                token, token_end = match.group(), start + match.end()
                if token.endswith("…"):
                    continue
                if match is tokens[-1] and _HYPHEN_END.search(token):
                    # Only the line's last token: a cut ends the visible text (Textual wraps at spaces).
                    found.append(Cut(r, token_end - 1, f"“{token}” ends in a hyphen: the rest was cut", line))
                    continue
                tail = _TAIL.search(token)
                if tail is None:
                    continue
                word = tail.group().lower()
                if token_end == width and end == width and word not in vocab:
                    found.append(Cut(r, token_end - 1, f"“{token}” runs into the screen's edge", line))
                elif len(word) > 1 and word.isalpha() and word not in vocab \
                        and _prefix_of_a_word(word, vocab, longer):
                    found.append(Cut(r, token_end - 1, f"“{token}” is the start of a longer word", line))
            start = end + 1
    return found
