"""The test and bench harness: what only the tests, the benches and `make docs` run -- the
strict Slack server, the stand-ins for vLLM and verl, traffic and history generators,
rendered consoles, the browser's helpers and the doc generators.

Never shipped: the wheel (pyproject.toml lists its packages) and the image (.dockerignore)
leave this folder out, and no module of runwatch imports it (tests/unit/test_architecture.py).
The tests find it through pytest's `pythonpath` (pyproject.toml); the benches and the rest of
the development environment through the path file `make setup` puts in .venv
(scripts/bootstrap.sh).
"""
