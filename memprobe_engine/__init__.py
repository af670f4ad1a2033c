"""MemProbe engine: runs memory benchmarks and records every step as a replayable event log.

Nothing below this package imports Textual; the TUI (``memprobe_tui``) reads recordings and calls
engine functions, never the other way round.
"""

__version__ = "0.1.0"
