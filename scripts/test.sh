#!/usr/bin/env bash
# make test: set-up plus every test, at three levels:
#   1. plain `cargo test` of the Postgres-free core (real models, reference vectors from Python onnxruntime)
#   2. `cargo pgrx test`: #[pg_test]s inside a real Postgres 18 + pgvector
#   3. end to end through real clients against a freshly started server, twice: with pg_feedback preloaded (models
#      run in the shared inference worker) and without (models run in each backend). pg_regress (psql), expected
#      output (including error text) compared line by line; 16 concurrent writers and isolation levels, roles, the
#      survival of notes through ALTER EXTENSION UPDATE from 0.1.0, pg_dump/restore and re-embedding (psycopg,
#      pg_dump, pg_restore); the red-team findings replayed as the roles that found them; the bad-input matrix;
#      floods of the shared worker; a streaming replica (pg_basebackup -R, hot standby on the next port); a backend
#      killed by SIGKILL mid-COPY (crash recovery; last, it restarts every backend); in worker mode also the worker's
#      own tests (tests/e2e/worker.py).
# FB_TEST_ONLY=e2e runs only level 3 (the build must be installed: scripts/install_ext.sh does it).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
export FB_MODEL_DIR="$(model_dir)" FB_ORT_LIBRARY="$(ort_library)"

if [ "${FB_TEST_ONLY:-}" != e2e ]; then
log "1/3 cargo test (feedback_core)"
cargo test -p feedback_core -- --skip _corpus --skip secrets_by_author
log "guard corpora per author: injection (gated on held-out author C), secrets (gated on held-out author E)"
cargo test -p feedback_core --test injection_corpus -- --nocapture
cargo test -p feedback_core --test secrets_corpus -- --nocapture

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
    local mode="$1" preload=1 scripts="concurrent_ingest guard redteam survive matrix flood replica code_inputs revisions"
    [ "$mode" = backend ] && preload=0
    [ "$mode" = worker ] && scripts="$scripts worker"
    scripts="$scripts crash"   # last: it restarts every backend of the server
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
    local total passed
    total=$(( $(echo "$tests" | wc -w) + $(cat "$out"/*.log | grep -c '^\(not \)\?ok - ' || true) ))
    passed=$(( $(grep -c '^ok ' "$out/regress.log" || true) + $(cat "$out"/*.log | grep -c '^ok - ' || true) ))
    echo "e2e ($mode mode): $passed passed, $((total - passed)) failed"
    bash "$ROOT/scripts/pg.sh" stop "$e2e_data" >/dev/null 2>&1 || true
    [ "$regress_status" -eq 0 ] && [ "$e2e_status" -eq 0 ]
}

set +e
suite worker; worker_status=$?
suite backend; backend_status=$?
set -e
[ "$worker_status" -eq 0 ] && [ "$backend_status" -eq 0 ]
