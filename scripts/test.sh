#!/usr/bin/env bash
# make test: set-up plus every test, at three levels:
#   0. the versioned SQL (scripts/check_versions.py): released scripts unchanged, the update chain whole
#   1. plain `cargo test` of the Postgres-free core (real models, reference vectors from Python onnxruntime)
#   2. `cargo pgrx test`: #[pg_test]s inside a real Postgres 18 + pgvector
#   3. end to end through real clients against a freshly started server, twice: with pg_feedback preloaded (models
#      run in the shared inference worker: everything) and without (models run in each backend: pg_regress and the
#      scripts about where models run, BACKEND_SCRIPTS below). pg_regress (psql), expected
#      output (including error text) compared line by line, among it every released version installed and updated
#      in turn (oldextversions); then every script in tests/e2e (psycopg, pg_dump, pg_restore, a streaming replica):
#      16 concurrent writers and isolation levels, roles, the survival of notes through ALTER EXTENSION UPDATE from
#      0.1.0, pg_dump/restore and re-embedding, the red-team findings replayed as the roles that found them, the
#      bad-input matrix, floods of the shared worker, the README's examples; in worker mode also the worker's own
#      tests (worker.py); last, a backend killed by SIGKILL mid-COPY (crash.py: it restarts every backend).
# Focused runs (the Makefile's test-core, test-pg, e2e):
#   FB_TEST_ONLY=core|pg|e2e      one level (e2e installs the build first)
#   FB_E2E_SCRIPTS="revisions"    only these tests/e2e scripts (names without .py; "regress" is pg_regress)
#   FB_E2E_MODES="backend"        only these inference modes (worker, backend)
#   FB_E2E_FULL=1                 every e2e script in backend mode too (default: BACKEND_SCRIPTS)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
export FB_MODEL_DIR="$(model_dir)" FB_ORT_LIBRARY="$(ort_library)"

only="${FB_TEST_ONLY:-all}"
log "0/3 versioned SQL"
python3 "$ROOT/scripts/check_versions.py"

if [ "$only" = all ] || [ "$only" = core ]; then
log "1/3 cargo test (feedback_core)"
cargo test -p feedback_core -- --skip _corpus --skip secrets_by_author
log "guard corpora per author: injection (floors per held-out author C, G, H, N, R, S, X and rules-tune authors I, M), secrets (floors per held-out author E, AA)"
cargo test -p feedback_core --test injection_corpus -- --nocapture
cargo test -p feedback_core --test secrets_corpus -- --nocapture
fi

if [ "$only" = all ] || [ "$only" = pg ]; then
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

[ "$only" = all ] || [ "$only" = e2e ] || exit 0
log "3/3 end-to-end, in both inference modes"
bash "$ROOT/scripts/install_ext.sh"
e2e_data="$RUN/e2e-pgdata"
e2e_port="${FB_TEST_PORT:-5434}"
trap 'bash "$ROOT/scripts/pg.sh" stop "$e2e_data" >/dev/null 2>&1' EXIT

# Runs pg_regress and the e2e scripts against a fresh server; $1 = worker (preloaded) or backend.
# The e2e scripts: every tests/e2e file run as a program, in name order; worker.py only in worker mode; crash.py last
# (it restarts every backend of the server). Backend mode runs pg_regress and the scripts whose subject is where the
# models run (BACKEND_SCRIPTS: model outputs, bad input and broken model files, caps and cancellation, concurrent
# writers each loading the models, a streaming standby, a killed backend); the rest (roles, red team, revisions,
# upgrades and restores, the README, retrieval quality) are the same SQL over the same model outputs, which
# pg_regress compares in both modes, and run once, in worker mode. FB_E2E_FULL=1 runs every script in both modes.
BACKEND_SCRIPTS="matrix flood concurrent_ingest replica crash"
e2e_scripts() {
    local mode="$1" all
    all=$(cd "$ROOT/tests/e2e" && grep -l '^if __name__ == "__main__":' *.py | sed 's/\.py$//' | sort)
    for s in $all; do
        case "$s" in
            crash) ;;
            worker) [ "$mode" = worker ] && echo "$s" ;;
            *) if [ "$mode" = worker ] || [ -n "${FB_E2E_FULL:-}" ] || [ -n "${FB_E2E_SCRIPTS:-}" ] \
                   || [[ " $BACKEND_SCRIPTS " == *" $s "* ]]; then echo "$s"; fi ;;
        esac
    done
    echo "$all" | grep -qx crash && echo crash
}
wanted() { [ -z "${FB_E2E_SCRIPTS:-}" ] || [[ " $FB_E2E_SCRIPTS " == *" $1 "* ]]; }

suite() {
    local mode="$1" preload=1 scripts=""
    [ "$mode" = backend ] && preload=0
    for s in $(e2e_scripts "$mode"); do wanted "$s" && scripts="$scripts $s"; done
    local out="$RUN/e2e-$mode"
    bash "$ROOT/scripts/pg.sh" stop "$e2e_data" 2>/dev/null || true
    rm -rf "$e2e_data" "$out"
    mkdir -p "$out/regress"
    FB_PRELOAD=$preload bash "$ROOT/scripts/pg.sh" start "$e2e_data" "$e2e_port"
    local tests="" regress_status=0 e2e_status=0
    if wanted regress; then
        log "end-to-end ($mode mode): pg_regress through psql"
        tests=$(cd tests/regress/sql && ls *.sql | sed 's/\.sql$//' | sort)
        FB_REGRESS_OUT="$out/regress" bash "$ROOT/scripts/regress.sh" 127.0.0.1 "$e2e_port" $tests \
            | tee "$out/regress.log"
        regress_status=${PIPESTATUS[0]}
    fi
    for script in $scripts; do
        log "end-to-end ($mode mode): tests/e2e/$script.py through real sessions (psycopg)"
        FB_E2E_PGDATA="$e2e_data" "$VENV/bin/python" "$ROOT/tests/e2e/$script.py" "$e2e_port" "$(pg_install)/bin" \
            | tee "$out/$script.log"
        [ "${PIPESTATUS[0]}" -eq 0 ] || e2e_status=1
    done
    local total passed
    total=$(( $(echo "$tests" | wc -w) + $(cat "$out"/*.log 2>/dev/null | grep -c '^\(not \)\?ok - ' || true) ))
    passed=$(( $(grep -c '^ok ' "$out/regress.log" 2>/dev/null || true) \
               + $(cat "$out"/*.log 2>/dev/null | grep -c '^ok - ' || true) ))
    echo "e2e ($mode mode): $passed passed, $((total - passed)) failed"
    bash "$ROOT/scripts/pg.sh" stop "$e2e_data" >/dev/null 2>&1 || true
    [ "$regress_status" -eq 0 ] && [ "$e2e_status" -eq 0 ]
}

set +e
status=0
for mode in ${FB_E2E_MODES:-worker backend}; do
    case "$mode" in worker|backend) ;; *) die "FB_E2E_MODES: worker or backend, not $mode" ;; esac
    suite "$mode" || status=1
done
exit "$status"
