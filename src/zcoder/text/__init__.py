"""Text made safe to show or to read, one rule each: ``visible`` writes control characters
as visible tokens, ``flat`` folds text to one line, ``decimal`` reads the plain ASCII
numbers of settings. Pure, floor 1; nothing here imports beyond the standard library, so
``cli`` can use it before anything heavy is loaded.
"""
