# zcoder developer tasks

default: lint test

# ruff and mypy --strict over the sources, tests and benchmarks
lint:
    ruff check src tests bench
    ruff format --check src tests bench
    mypy

# the whole test suite in two runs: first all but the real-model tests, a worker process a
# core (at most 4), a test at a time to whichever worker is free; then the real-model tests
# alone in one process, as their llama.cpp servers need the cores (beside the parallel run
# a compaction step took minutes). -p no:benchmark: pytest-benchmark, where installed, warns
# that xdist disables it, and warnings are errors here. A run that selects no test (exit
# status 5: ``just test tests/ui`` has no real-model test) is no failure.
test *ARGS:
    python -m pytest -n auto --maxprocesses 4 -p no:benchmark -m "not realmodel" {{ARGS}} || [ $? -eq 5 ]
    python -m pytest -p no:benchmark -m realmodel {{ARGS}} || [ $? -eq 5 ]

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
    python -m bench.checkpoint
    python bench/sandbox.py
