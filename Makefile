# pg_feedback — every target works from a fresh clone, as root or as a normal user.
#   make demo    set-up, build, start Postgres 18 on 127.0.0.1:$FB_PORT (5433) with the sample notes
#   make test    set-up plus every test (cargo test, cargo pgrx test, pg_regress end to end)
#   make bench   benchmark table (results/bench.md); make calibrate: fb_calibrate() on the tune split, fb_eval on test
#   make scale   scale curve at 10k/100k/1M notes on its own cluster (127.0.0.1:5446; results/scale.md, FB_SCALE_SIZES)
#   make psql    psql on the demo database;   make stop   stop the demo server
#   make fixtures  recompute the reference vectors with Python onnxruntime

.PHONY: setup demo test bench scale calibrate psql stop fixtures clean

setup:
	bash scripts/setup.sh

demo:
	bash scripts/demo.sh

test:
	bash scripts/test.sh

bench: demo
	cd bench && ../.venv/bin/python bench.py

scale: setup
	bash scripts/install_ext.sh
	.venv/bin/python bench/scale.py

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
