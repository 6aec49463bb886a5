"""Reading shell command lines, never running them: ``words`` is a small POSIX-shell lexer
(simple commands, quotes, operators, here-documents, ``$(...)`` bodies), ``forms`` the
bash word forms it decodes (``$'...'``, ``${X:-w}``), ``wrappers`` what a command really
runs once ``sudo``/``env``/``sh -c`` are stripped, and ``guard`` the sysadmin profile's
catastrophic-command guard built on them. Pure, floor 2.
"""
