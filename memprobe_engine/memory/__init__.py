"""Memory systems under test: the protocol every system implements, a recorded item store, and the
built-in systems (one module each)."""
