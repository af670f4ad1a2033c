"""The span tree's rules, checked as events arrive: one place decides what a damaged tree is.

A well-formed recording opens every span once, after its parent, and closes it once. A span id used
twice, a parent that was never opened before its child, or an end for a span that is not open is
damage; following such ids blindly is how a reader loops forever (a span that is its own ancestor).
:class:`SpanTree` keeps only ids and parents, so a reader can run it over millions of spans; readers
that build a richer tree (the replay index) use its verdicts to decide what to link.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SpanTree:
    """Span ids seen so far with their parents (``None``: a root), and which are still open."""

    parents: dict[str, str | None] = field(default_factory=dict)
    open_lines: dict[str, int] = field(default_factory=dict)
    #: Parent ids referenced before they were opened -> the first line that referenced them.
    pending: dict[str, int] = field(default_factory=dict)

    def begin(self, span_id: str, parent: str | None, line: int) -> str | None:
        """Record a span_begin; returns why it is damaged, or None.

        A damaged begin with a reused id is not recorded (the first span keeps the id); one with an
        unknown parent is recorded as a root, so no walk up the tree can revisit a span.
        """
        if span_id in self.parents:
            if self._is_ancestor(span_id, parent):
                return f"span cycle: span {span_id!r} reopened under its own descendant {parent!r}"
            return f"span id {span_id!r} reused (first opened at line {self.open_lines.get(span_id, -1) + 1})" \
                if span_id in self.open_lines else f"span id {span_id!r} reused"
        if parent is not None and parent == span_id:
            self.parents[span_id] = None
            self.open_lines[span_id] = line
            return f"span cycle: span {span_id!r} is its own parent"
        problem: str | None = None
        if span_id in self.pending:
            problem = (f"span cycle: span {span_id!r} was named as a parent at line {self.pending[span_id] + 1}, "
                       f"before it was opened")
        if parent is not None and parent not in self.parents:
            self.pending.setdefault(parent, line)
            problem = problem or f"unknown parent span {parent!r} (not opened before this line)"
            parent = None
        self.parents[span_id] = parent
        self.open_lines[span_id] = line
        return problem

    def end(self, span_id: str) -> str | None:
        """Record a span_end; returns why it is damaged, or None."""
        if span_id in self.open_lines:
            del self.open_lines[span_id]
            return None
        if span_id in self.parents:
            return f"span {span_id!r} closed twice"
        return f"span_end for unknown span {span_id!r}"

    def _is_ancestor(self, span_id: str, start: str | None) -> bool:
        seen: set[str] = set()
        current = start
        while current is not None and current not in seen:
            if current == span_id:
                return True
            seen.add(current)
            current = self.parents.get(current)
        return False

    def unclosed(self) -> list[str]:
        """Ids of spans opened and never closed, in opening order."""
        return sorted(self.open_lines, key=self.open_lines.__getitem__)
