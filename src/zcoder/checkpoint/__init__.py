"""Checkpoints: the workspace as it was before each turn's first change, and the undo.

A shadow git repository per workspace under ``$ZCODER_HOME/checkpoints/`` has the workspace
as its work tree and never touches the workspace's own ``.git`` (``shadow.py``, the only
module that runs git). ``tracker.py`` takes a turn's snapshot lazily, before its first file
write or command, and another at its end, and keeps each session's turns that changed files
(``records.py``: their JSON file beside the shadow repository, pruned by age and count;
``upkeep.py`` bounds what other sessions left).
What an undo restores and what it must leave to the user is decided by a pure core
(``plan.py``); the words the user and the model read are ``text.py``'s. ``settings.py`` is
the configuration table (``config`` imports it, never the other way).
"""
