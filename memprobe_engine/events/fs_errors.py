"""One line for a file-system failure under a recording: which path, what went wrong, what to do.

Writing a recording touches the disk at a few places (creating the folder, the lock, the header,
appending events and payloads); reading it at a few more. Each turns an ``OSError`` into a
:class:`RecordingError` through :func:`recording_os_error`, so a recording folder that is a file, a
read-only disk or a full one ends the command with one line naming the path and the fix, never a
traceback. A failed append loses nothing: a line cut short is set aside when the recording is
opened again (``writer.py``), and every complete event before it stays.
"""

from __future__ import annotations

import errno
from pathlib import Path

from memprobe_engine.errors import RecordingError

_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}
_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def recording_os_error(path: Path, err: OSError, doing: str) -> RecordingError:
    """The message for ``err``, raised while ``doing`` (e.g. "create the recording") at ``path``."""
    reason = err.strerror or type(err).__name__
    if isinstance(err, (FileExistsError, NotADirectoryError)) or err.errno in (errno.EEXIST, errno.ENOTDIR):
        return RecordingError(f"{path} is a file, not a recording folder ({reason}): a recording is a folder; give "
                              f"the path of a new or existing recording folder instead.")
    if doing.startswith("read"):
        return RecordingError(f"{path}: cannot {doing} ({reason}). Make the file readable (chmod u+r {path}), or "
                              f"restore it from a copy of the recording.")
    if err.errno in _FULL:
        return RecordingError(f"{path}: the disk is full ({reason}) and MemProbe could not {doing}. Every event "
                              f"written before is kept: free space on that disk, then run the same command again "
                              f"to resume.")
    if err.errno in _READ_ONLY:
        return RecordingError(f"{path}: cannot {doing} ({reason}): the recording or its parent folder is "
                              f"read-only. Make it writable, or copy the recording to a writable folder and "
                              f"give that copy instead.")
    return RecordingError(f"{path}: cannot {doing} ({reason}). Check the path and its permissions, or use "
                          f"another folder.")
