# zcoder developer tasks

default: lint test

# ruff and mypy --strict over the sources, tests and benchmarks
lint:
    ruff check src tests bench
    ruff format --check src tests bench
    mypy

# the whole test suite, a worker process a core (at most 4); the real-model tests keep to
# one worker (the xdist_group "realmodel": their llama.cpp servers would starve each other),
# the others go a test at a time to whichever worker is free; -p no:benchmark:
# pytest-benchmark, where installed, warns that xdist disables it, and warnings are errors
test *ARGS:
    python -m pytest -n auto --maxprocesses 4 --dist loadgroup -p no:benchmark {{ARGS}}

# Sphinx docs, warnings are errors
docs:
    python -m sphinx -W -b html docs docs/_build/html

# benchmarks (print figures; not tests)
bench:
    python bench/relay.py
    python bench/oneshot.py
    python bench/ui.py
    python -m bench.sessions
    python -m bench.compaction
    python -m bench.enqueue
    python -m bench.startup
