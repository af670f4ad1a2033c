"""Errors a user can cause, each carrying one message that names the file or setting and the fix.

The CLI catches :class:`MemProbeError` and prints ``message`` alone — no traceback — so every
subclass must say what went wrong *and* what to do about it.
"""

from __future__ import annotations


class MemProbeError(Exception):
    """Base class for user-facing errors; ``str(err)`` is the whole message shown to the user."""


class RecordingError(MemProbeError):
    """A recording directory is missing, foreign, damaged beyond use, or locked by another writer."""


class ConfigError(MemProbeError):
    """A configuration file, environment variable or CLI flag holds an unusable value."""


class LLMError(MemProbeError):
    """An LLM endpoint failed in a way retries cannot fix (unreachable, bad key, unknown model)."""


class ContextOverflow(LLMError):
    """The endpoint refused a request as longer than its context window. Retrying cannot help, and
    it is not the end of a run: the caller records the case as an overflow under its exclusion policy."""


class ReplayMiss(LLMError):
    """A replay backend was asked for a request the recording does not hold."""


class ModelAssetError(MemProbeError):
    """The embedded model's files are missing or fail their hash check."""
