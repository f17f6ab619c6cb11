"""Upkeep of stored sessions: the doctor's checks and repairs, erasure (purge, redact,
vacuum), recounting tokens, and the planner's statistics.
"""
