"""A third benchmark protocol, written only against MemProbe's public protocol interface, to show that a
protocol is one package plus one registry line (an entry point in the ``memprobe.protocols`` group).

``keyrecall``: each memory system is told a few locker codes, one per session, and asked for each code
back with its own search; a unit's score is the share of codes found in its top-k. No model is called;
systems that embed use the run's embedder.
"""
