"""Approving what the agent does: ``questions`` is what it asks the local user and the
protocol of whoever answers (pure data, floor 1); ``policy`` decides whether a command
runs, is asked about, denied or blocked (by ``shell.guard``), what an answer grants, and
which writes of a relayed turn touch instruction or control files (pure, floor 2).
"""
