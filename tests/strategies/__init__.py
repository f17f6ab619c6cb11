"""Tests of the compaction strategies."""
