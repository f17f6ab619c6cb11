"""Upkeep of stored sessions: the doctor's checks and repairs, erasure (purge, redact,
vacuum), recounting tokens, the planner's statistics, and the administrator's listing of
tenants.
"""
