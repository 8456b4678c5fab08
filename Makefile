# pg_feedback — every target works from a fresh clone, as root or as a normal user.
#   make demo          set-up, build, start Postgres 18 on 127.0.0.1:$FB_PORT (5433) with the sample notes
#   make install       build and install into the embedded Postgres 18, or into another Postgres 18 with pgvector:
#                      make install PG_CONFIG=/usr/lib/postgresql/18/bin/pg_config (also ONNX Runtime and the models)
#   make installcheck  pg_regress against a running server (default the demo: PGHOST 127.0.0.1, PGPORT $FB_PORT,
#                      PGUSER postgres); REGRESS="embed notes" for a subset
#   make test          set-up plus every test (check-versions, test-core, test-pg, e2e in both inference modes:
#                      everything with the worker, the model-path scripts without; FB_E2E_FULL=1 everything twice)
#   make test-core     cargo test of the Postgres-free core crate (real models)
#   make test-pg       cargo pgrx test: the #[pg_test]s inside a real Postgres 18 + pgvector
#   make e2e           pg_regress and tests/e2e/*.py against fresh servers; SCRIPT="revisions matrix" (regress:
#                      pg_regress) and MODE=worker|backend for a subset
#   make check-versions  released SQL scripts unchanged, the update chain from 0.1.0 whole
#   make bench         benchmark table (results/bench.md); make calibrate: fb_calibrate() on the tune split
#   make scale         scale curve at 10k/100k/1M notes on its own cluster (127.0.0.1:5446; results/scale.md)
#   make benchmarks    BENCHMARKS.md from bench/BENCHMARKS.in.md and the two results files above
#   make psql          psql on the demo database;   make stop   stop the demo server
#   make fixtures      recompute the reference vectors with Python onnxruntime

PG_CONFIG ?=
REGRESS ?=
SCRIPT ?=
MODE ?= worker backend
FB_PORT ?= 5433
PGHOST ?= 127.0.0.1
PGPORT ?= $(FB_PORT)

.PHONY: setup demo install installcheck test test-core test-pg e2e check-versions bench scale benchmarks calibrate psql stop \
        fixtures clean

setup:
	bash scripts/setup.sh

demo:
	bash scripts/demo.sh

install: setup
	FB_PG_CONFIG="$(PG_CONFIG)" bash scripts/install_ext.sh

installcheck:
	FB_PG_CONFIG="$(PG_CONFIG)" bash scripts/regress.sh "$(PGHOST)" "$(PGPORT)" $(REGRESS)

test:
	bash scripts/test.sh

test-core:
	FB_TEST_ONLY=core bash scripts/test.sh

test-pg:
	FB_TEST_ONLY=pg bash scripts/test.sh

e2e:
	FB_TEST_ONLY=e2e FB_E2E_SCRIPTS="$(SCRIPT)" FB_E2E_MODES="$(MODE)" bash scripts/test.sh

check-versions:
	python3 scripts/check_versions.py

bench: demo
	cd bench && ../.venv/bin/python bench.py

scale: setup
	bash scripts/install_ext.sh
	.venv/bin/python bench/scale.py

benchmarks:
	.venv/bin/python bench/report.py

calibrate: demo
	bash scripts/psql.sh -c "SELECT * FROM fb_calibrate()" \
	    -c "SELECT * FROM fb_eval(split => 'test', record => false) WHERE task_type = '(all)'"

psql:
	bash scripts/psql.sh

stop:
	bash scripts/pg.sh stop "$(CURDIR)/.pgdata"

fixtures: setup
	bash -c 'source scripts/common.sh && "$$VENV/bin/python" scripts/make_reference_vectors.py "$$(model_dir)"'

clean: stop
	rm -rf .run .pgdata target
