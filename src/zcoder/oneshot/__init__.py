"""The one-shot mode (``zcoder -p TEXT``): one user turn in a plain ``trio.run``, no
prompt_toolkit and no relay. ``run`` prepares the run, drives the turn and says the exit
status; ``terminal`` is its terminal side: the answer on stdout, activity on stderr,
approvals asked on ``/dev/tty``. Floor 5, beside ``app/``.
"""
