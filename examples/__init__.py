"""Example code for MemProbe users: importable as ``examples.<module>`` from the repository root."""
