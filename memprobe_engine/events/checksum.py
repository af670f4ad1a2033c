"""Per-line integrity of ``events.jsonl`` (schema version 2 on): a short CRC-32 sealed into each line.

The writer serializes an event to its canonical orjson bytes ``{...}`` and appends one more member,
``"ck":"<8 hex digits>"``, the CRC-32 of those bytes. The member is always last and always the same
length, so the reader checks a line without parsing it first: strip the 17-byte suffix, recompute the
CRC over what is left (closed again with ``}``), compare. A flipped byte that still parses as JSON is
caught this way, and so is a torn or garbled line. CRC-32 is not a defence against an adversary (that
would need a keyed MAC); it detects accidents — bit rot, hand edits, concatenation bugs — cheaply.
"""

from __future__ import annotations

import zlib

#: Name of the checksum member; no event model has a field of that name.
CHECKSUM_FIELD = "ck"
_PREFIX = b',"ck":"'
_SUFFIX_LEN = len(_PREFIX) + 8 + 2  # ,"ck":"  8 hex digits  "}
_HEX = frozenset(b"0123456789abcdef")


def seal(body: bytes) -> bytes:
    """``body`` (an orjson object, ``{...}``, no newline) with its checksum member appended."""
    return b"%s%s%08x\"}" % (body[:-1], _PREFIX, zlib.crc32(body))


def has_seal(line: bytes) -> bool:
    """Whether ``line`` (with or without its newline) ends in a checksum member."""
    end = len(line) - 1 if line.endswith(b"\n") else len(line)
    start = end - _SUFFIX_LEN
    return start > 0 and line[start:start + len(_PREFIX)] == _PREFIX and line[end - 2:end] == b'"}'


def unseal(line: bytes) -> tuple[bytes, bool | None]:
    """(the event's JSON bytes, verdict): True when the seal matches, False when it does not, None
    when the line carries no seal (an older schema version). The bytes returned have no seal."""
    end = len(line) - 1 if line.endswith(b"\n") else len(line)
    if not has_seal(line):
        return line[:end], None
    digits = line[end - 10:end - 2]
    body = line[:end - _SUFFIX_LEN] + b"}"
    if not _HEX.issuperset(digits):
        return body, False
    return body, zlib.crc32(body) == int(digits, 16)
