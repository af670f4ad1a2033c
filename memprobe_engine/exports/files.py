"""Where exports go: folders created on demand, files written whole, every OS error as one line.

Every writer of the registry goes through :func:`write_file` and the reports' own
:func:`~memprobe_engine.report.output.output_folder`, so a full disk or a path under a file reads the
same everywhere: the path, the reason and the fix.
"""

from __future__ import annotations

import os
from pathlib import Path

from memprobe_engine.errors import ConfigError
from memprobe_engine.report.output import output_folder


def write_file(path: Path, data: bytes, flag: str = "--out") -> Path:
    """Write ``data`` to ``path`` through a temporary file renamed into place (a reader never sees
    half a file); ConfigError naming ``flag`` and the path when it cannot be written."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{flag} {path}: is a folder; pass a file name.")
    output_folder(path.parent if str(path.parent) else Path("."))
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    except OSError as err:
        temporary.unlink(missing_ok=True)
        raise ConfigError(f"{flag} {path}: cannot write the export ({err.strerror or err}); free space or "
                          f"pass another path.") from None
    return path
