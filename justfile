# zcoder developer tasks

default: lint test

# ruff and mypy --strict over the sources, tests and benchmarks
lint:
    ruff check src tests bench
    ruff format --check src tests bench
    mypy

# the whole test suite, a file to a worker process (a file's shared servers start once)
# and a worker a core (at most 4); -p no:benchmark: pytest-benchmark, where installed,
# warns that xdist disables it, and warnings are errors here
test *ARGS:
    python -m pytest -n auto --maxprocesses 4 --dist loadfile -p no:benchmark {{ARGS}}

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
