"""Branches in SQL: forks that read their parent's rows, and rewinds' superseded tails
(``docs/branches.md``)."""
