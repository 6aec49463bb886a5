"""Tests of ``zcoder.oneshot``: the one-shot run end to end and its terminal side."""
