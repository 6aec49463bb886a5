"""The process-private spool of accepted relay messages: ``inbox -> processing -> done``.

``store.Spool`` is the one writer of the spool's directories and keeps their index in
memory; ``entry`` is one spool file's bytes (written whole, renamed into place, parsed
again on claim); ``fault`` classifies what the file system refuses (damage or a storage
fault); ``quarantine`` moves aside what does not belong and reports it.
"""
