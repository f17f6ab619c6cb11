"""chatledger's benchmark harness (issue 7): run it with ``python -m benchmarks``.

Not part of the library: nothing under ``store/`` or ``strategies/`` imports it.
"""
