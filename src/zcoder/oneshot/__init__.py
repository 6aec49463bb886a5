"""The one-shot mode (``zcoder -p TEXT``): one user turn in a plain ``trio.run``, no
prompt_toolkit and no relay. ``run`` prepares the run, drives the turn and says the exit
status; ``output`` is what it prints per ``--output-format``: ``terminal`` for text (the
answer on stdout, activity on stderr, approvals asked on ``/dev/tty``), ``records`` for
the JSON records (docs/output-format.rst), ``usage`` for the token counts. Floor 5, beside
``app/``.
"""
