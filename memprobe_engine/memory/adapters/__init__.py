"""Adapters over third-party memory libraries (optional extras), one module per library.

Each adapter is a MemorySystem whose ingest, retrieval and store are the library's own; its LLM
and embedding calls go through the loopback recording proxy. See :mod:`.base`.
"""
