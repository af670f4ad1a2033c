"""Protocol A (hidden user-state recovery): the simulated users, their hidden banks and tasks.

``inputs`` holds the typed on-disk inputs — the taxonomy pool, each user's persona profile,
31-slot memory bank and leak-controlled tasks — plus loaders and a validator that reports every
problem in a sessions tree at once.
"""
