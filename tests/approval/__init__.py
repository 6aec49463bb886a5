"""Tests of ``zcoder.approval``: the approval decisions and the control-file checks."""
