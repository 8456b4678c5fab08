#!/usr/bin/env bash
# make test: set-up plus every test, at three levels:
#   1. plain `cargo test` of the Postgres-free core (real models, reference vectors from Python onnxruntime)
#   2. `cargo pgrx test`: #[pg_test]s inside a real Postgres 18 + pgvector
#   3. end to end through real clients against a freshly started server, twice: with pg_feedback preloaded (models
#      run in the shared inference worker) and without (models run in each backend). pg_regress (psql), expected
#      output (including error text) compared line by line; concurrent sessions, roles, and the survival of notes
#      through ALTER EXTENSION UPDATE from 0.1.0, pg_dump/restore and re-embedding (psycopg, pg_dump, pg_restore);
#      in worker mode also the worker's own tests (tests/e2e/worker.py).
# FB_TEST_ONLY=e2e runs only level 3 (the build must be installed: scripts/install_ext.sh does it).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
export FB_MODEL_DIR="$(model_dir)" FB_ORT_LIBRARY="$(ort_library)"

if [ "${FB_TEST_ONLY:-}" != e2e ]; then
log "1/3 cargo test (feedback_core)"
cargo test -p feedback_core -- --skip _corpus
log "guard corpora: detection, false positives, redaction per format (gated on the test split)"
cargo test -p feedback_core --test guard_corpus -- --nocapture

log "2/3 cargo pgrx test (pg18)"
# pgrx installs its test build into the same Postgres: the next install must rebuild the real one.
rm -f "$RUN/installed.stamp"
if is_root; then
    mkdir -p "$RUN/test-pgdata"
    chown "$PG_OS_USER" "$RUN/test-pgdata"
    cargo pgrx test pg18 --runas "$PG_OS_USER" --pgdata "$RUN/test-pgdata"
else
    cargo pgrx test pg18
fi
fi

log "3/3 end-to-end, in both inference modes"
bash "$ROOT/scripts/install_ext.sh"
e2e_data="$RUN/e2e-pgdata"
e2e_port="${FB_TEST_PORT:-5434}"
trap 'bash "$ROOT/scripts/pg.sh" stop "$e2e_data" >/dev/null 2>&1' EXIT

# Runs pg_regress and the e2e scripts against a fresh server; $1 = worker (preloaded) or backend.
suite() {
    local mode="$1" preload=1 scripts="concurrent_ingest guard survive"
    [ "$mode" = backend ] && preload=0
    [ "$mode" = worker ] && scripts="$scripts worker"
    local out="$RUN/e2e-$mode"
    bash "$ROOT/scripts/pg.sh" stop "$e2e_data" 2>/dev/null || true
    rm -rf "$e2e_data" "$out"
    mkdir -p "$out/regress"
    FB_PRELOAD=$preload bash "$ROOT/scripts/pg.sh" start "$e2e_data" "$e2e_port"
    PGPORT_OVERRIDE="$e2e_port" fb_psql -d postgres -qc "CREATE DATABASE fb_regress"
    log "end-to-end ($mode mode): pg_regress through psql"
    local tests regress_status=0 e2e_status=0
    tests=$(cd tests/regress/sql && ls *.sql | sed 's/\.sql$//' | sort)
    "$(pg_install)/lib/pgxs/src/test/regress/pg_regress" \
        --use-existing --host=127.0.0.1 --port="$e2e_port" --user=postgres --dbname=fb_regress \
        --bindir="$(pg_install)/bin" --inputdir="$ROOT/tests/regress" --outputdir="$out/regress" $tests \
        | tee "$out/regress.log"
    regress_status=${PIPESTATUS[0]}
    if [ "$regress_status" -ne 0 ] && [ -f "$out/regress/regression.diffs" ]; then
        cat "$out/regress/regression.diffs"
    fi
    for script in $scripts; do
        log "end-to-end ($mode mode): tests/e2e/$script.py through real sessions (psycopg)"
        FB_E2E_PGDATA="$e2e_data" "$VENV/bin/python" "$ROOT/tests/e2e/$script.py" "$e2e_port" "$(pg_install)/bin" \
            | tee "$out/$script.log"
        [ "${PIPESTATUS[0]}" -eq 0 ] || e2e_status=1
    done
    [ "$mode" = worker ] && { standby_check "$out/standby.log" || e2e_status=1; }
    local total passed
    total=$(( $(echo "$tests" | wc -w) + $(cat "$out"/*.log | grep -c '^\(not \)\?ok - ' || true) ))
    passed=$(( $(grep -c '^ok ' "$out/regress.log" || true) + $(cat "$out"/*.log | grep -c '^ok - ' || true) ))
    echo "e2e ($mode mode): $passed passed, $((total - passed)) failed"
    bash "$ROOT/scripts/pg.sh" stop "$e2e_data" >/dev/null 2>&1 || true
    [ "$regress_status" -eq 0 ] && [ "$e2e_status" -eq 0 ]
}

# The inference worker on a hot standby: a pg_basebackup of the e2e server, started with the library preloaded,
# answers fb_embed_query and fb_retrieve in recovery through its own worker (in the database worker.py leaves),
# without logging the retrieval although pg_feedback.log_retrievals is on.
standby_check() {
    local log="$1" standby="$RUN/e2e-standby" port=$((e2e_port + 1)) bin
    bin="$(pg_install)/bin"
    rm -rf "$standby" && mkdir -p "$standby"
    is_root && chown "$PG_OS_USER" "$standby"
    chmod 700 "$standby"
    log "end-to-end (worker mode): the inference worker on a hot standby"
    as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$e2e_port" -U postgres -D "$standby" -R -X stream 2>/dev/null
    as_pg mkdir -p "$standby/sock"
    as_pg "$bin/pg_ctl" -D "$standby" -l "$standby/postgres.log" -w -t 60 -o "-p $port -c listen_addresses=127.0.0.1 \
        -k $standby/sock -c shared_preload_libraries=pg_feedback" start >/dev/null
    local got
    # With the retrieval log on, a standby retrieves and never tries to write the log.
    got=$(PGOPTIONS="-c pg_feedback.log_retrievals=on" "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres \
        -d fb_worker_e2e -Atc "
        SELECT current_setting('pg_feedback.log_retrievals') = 'on' AND pg_is_in_recovery(),
               (SELECT mode || ':' || (pid IS NOT NULL) FROM feedback_worker),
               vector_dims(fb_embed_query('is this safe on a standby?')),
               (SELECT count(*) >= 0 AND count(retrieval_id) = 0
                  FROM fb_retrieve('is this query injectable?', 'sql_injection_scan'))" 2>&1)
    as_pg "$bin/pg_ctl" -D "$standby" -m fast -w stop >/dev/null 2>&1
    if [ "$got" = "t|worker:true|384|t" ]; then
        echo "ok - standby_runs_the_inference_worker" | tee "$log"
    else
        echo "not ok - standby_runs_the_inference_worker: $got" | tee "$log"
        tail -n 20 "$standby/postgres.log"
        return 1
    fi
}

set +e
suite worker; worker_status=$?
suite backend; backend_status=$?
set -e
[ "$worker_status" -eq 0 ] && [ "$backend_status" -eq 0 ]
