"""Word-level old → new diffs of updated memory items (the memory view's ``~`` rows)."""

from __future__ import annotations

from memprobe_engine.replay.textdiff import item_changes, word_diff


def test_word_diff_keeps_every_word_once_and_marks_removed_and_added_runs() -> None:
    old, new = "likes tea in the morning", "likes strong coffee in the morning"
    pieces = word_diff(old, new)
    assert "".join(t for k, t in pieces if k != "new") == old
    assert "".join(t for k, t in pieces if k != "old") == new
    assert ("old", "tea ") in pieces and ("new", "strong coffee ") in pieces


def test_item_changes_lists_only_changed_fields_including_added_and_removed_ones() -> None:
    old = {"id": "m1", "memory": "a b", "tags": ["x"], "score": 1}
    new = {"id": "m1", "memory": "a c", "tags": ["x"], "updated_at": "t+1"}
    changes = {c.name: c for c in item_changes(old, new)}
    assert set(changes) == {"memory", "updated_at", "score"}
    assert changes["score"].new is None and changes["updated_at"].old is None
    assert changes["memory"].pieces() == [("same", "a "), ("old", "b"), ("new", "c")]
    assert item_changes(None, {"k": [1, 2]})[0].pieces() == [("new", "[1,2]")]
