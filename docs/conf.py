project = "zcoder"
author = "the zcoder team"
extensions: list[str] = []
html_theme = "alabaster"
exclude_patterns = ["_build"]
