"""The session store: saved conversations, one file per session, scoped to (workspace,
profile). ``store`` opens, saves, lists and locks them; ``data`` is a session's data and
its strict reading; ``journal`` the bytes of a file (a snapshot line, then one line per
save; pure); ``saves`` one save (append or snapshot); ``files`` the atomic writes,
appends and per-session locks underneath. Floor 2: never imports ``agent/``.
"""
