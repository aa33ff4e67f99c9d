# The two commands a new user needs are `make demo` and `make test`; both set themselves up.
.PHONY: setup setup-demo demo test unit lint fmt docs bench clean

VENV := .venv
PY := $(VENV)/bin/python

# Everything: the suite's tools, torch, the benchmarks' needs.
setup:
	@scripts/bootstrap.sh dev

# What the demo needs and no more (no torch), so a first `make demo` is quick.
setup-demo:
	@scripts/bootstrap.sh demo

demo: setup-demo
	@$(VENV)/bin/runwatch demo

# Two workers, a test file each at a time (its module fixtures stay in one process); each
# worker starts its own Kafka broker. Then the tests marked `solo`, which load the machine
# so much (1,000 runs through two workers) or keep time so tightly (a 4 s heartbeat timeout
# through pauses, kills and a broker restart) that they run with nothing beside them. About
# 16 minutes on 2 cores, against 23 one by one. The trainer envs (TRL, verl, vLLM: minutes of
# downloads on a fresh machine) build in the background meanwhile (scripts/with_trainer_envs.sh).
# The chart checks' helm is built first (a Go build: minutes of both cores on a fresh machine,
# which beside the suite would only slow the tests that keep time). The slowest tests are
# listed at the end: where the time went.
test: setup
	@scripts/ensure_prometheus.sh || true
	@scripts/ensure_chromium.sh || true
	@scripts/ensure_helm.sh >/dev/null || true
	@scripts/with_trainer_envs.sh $(PY) -m pytest -n 2 --dist loadfile -m "not solo" \
		--durations=20 $(PYTEST_ARGS)
	@$(PY) -m pytest -m solo $(PYTEST_ARGS)

# The inner loop: the unit tests, no service started, the slowest (marked `slow`) left to
# `make test`; two workers. Their temporary files on tmpfs where there is one: the product
# fsyncs each commit (the notifier's store, serve's logs), and on a disk other work shares
# each fsync is a wait. And pytest keeps the test modules it rewrote (their asserts) in
# __pycache__ even where PYTHONDONTWRITEBYTECODE is set, or each worker rewrites every one.
# (only where it has 2 GiB free: a container's /dev/shm is often 64 MiB)
SHM_FREE_KB := $(shell df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print $$4}')
UNIT_TMPDIR := $(if $(shell [ "$(SHM_FREE_KB)" -gt 2097152 ] 2>/dev/null && echo y),/dev/shm,$(or $(TMPDIR),/tmp))
unit: setup
	@TMPDIR=$(UNIT_TMPDIR) PYTHONDONTWRITEBYTECODE= \
		$(PY) -m pytest tests/unit -m "not slow" -n 2 -q -p no:cacheprovider $(PYTEST_ARGS)

# Regenerates what is made from code: the rule tables (docs/rules.md, docs/contract.md), the
# decoder's structs (stream/decode_structs.py, from the event models) and the Grafana dashboards
# (tests fail while a checked-in copy differs), and the screenshots of serve's page
# (docs/images/, taken with headless Chromium: scripts/ensure_chromium.sh installs it).
docs: setup
	$(PY) -m harness.docs.tables
	$(PY) -m runwatch.stream.decode_gen
	$(PY) -m harness.docs.dashboards
	@scripts/ensure_chromium.sh
	$(PY) -m harness.docs.screenshot docs/images

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	scripts/typecheck.sh
	@# the import contract: which folder may import which (tests/unit/test_architecture.py)
	$(PY) -m pytest -q -p no:cacheprovider tests/unit/test_architecture.py

fmt: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Figures only: no benchmark fails on timing. BENCH_ARGS=--quick for a short pass.
# emit.py and worker.py start their own local Kafka broker.
bench: setup
	$(PY) bench/decode.py $(BENCH_ARGS)
	$(PY) bench/replay.py $(BENCH_ARGS)
	$(PY) bench/live_path.py $(BENCH_ARGS)
	$(PY) bench/worker_profile.py
	$(PY) bench/worker_parts.py
	$(PY) bench/dynamics.py
	$(PY) bench/emit.py
	$(PY) bench/emit_checks.py $(BENCH_ARGS)
	$(PY) bench/worker.py
	$(PY) bench/fetch_wait.py
	$(PY) bench/output_read.py
	$(PY) bench/kafka_clients.py
	$(PY) bench/store.py $(BENCH_ARGS)
	$(PY) bench/exporter.py $(BENCH_ARGS)
	$(PY) bench/memory.py $(BENCH_ARGS)
	$(PY) bench/watch.py
	$(PY) bench/serve.py $(BENCH_ARGS)
	$(PY) bench/detection.py $(BENCH_ARGS)  # writes its section of bench/RESULTS.md

clean:
	rm -rf .pytest_cache .mypy_cache .ruff_cache build *.egg-info
