"""Tests of ``zcoder.session``: the store, its files and its journal."""
