"""The OS sandbox of shell commands (Linux, bubblewrap): see docs/safety.rst.

``probe`` says whether it works here; ``settle`` refuses or degrades a run that asks for
it where it does not; ``confine`` and ``scan`` gather what a command may see and must not
change; ``plan`` turns that into bwrap's command line; ``masks`` cleans up after it.
"""
