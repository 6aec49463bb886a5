"""Tests of ``zcoder.shell``: the lexer against real bash."""
