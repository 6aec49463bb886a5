"""Tests of ``zcoder.text``: the escaper, the one-line fold and the plain decimals."""
