"""Traces over time: following a growing trace file, replaying one turn by turn."""
