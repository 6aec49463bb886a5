# zcoder developer tasks

default: lint test

# ruff and mypy --strict over the sources, tests and benchmarks
lint:
    ruff check src tests bench
    ruff format --check src tests bench
    mypy

# the whole test suite
test *ARGS:
    python -m pytest {{ARGS}}

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
