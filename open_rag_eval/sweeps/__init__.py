"""Sweeps: the same evaluation run on a schedule, its history kept, and each run tested against it.

``run`` runs one sweep (evaluate, record, decide PASS / REGRESSION / INCONCLUSIVE); ``history`` is the SQLite
history of earlier sweep runs and the trend and regression tests over it.
"""
