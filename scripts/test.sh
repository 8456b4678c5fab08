#!/usr/bin/env bash
# make test: set-up plus every test, at three levels:
#   1. plain `cargo test` of the Postgres-free core (real models, reference vectors from Python onnxruntime)
#   2. `cargo pgrx test`: #[pg_test]s inside a real Postgres 18 + pgvector
#   3. end to end through real clients against a freshly started server: pg_regress (psql), expected output
#      (including error text) compared line by line; concurrent sessions, roles, and the survival of notes
#      through ALTER EXTENSION UPDATE from 0.1.0, pg_dump/restore and re-embedding (psycopg, pg_dump, pg_restore)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
export FB_MODEL_DIR="$(model_dir)" FB_ORT_LIBRARY="$(ort_library)"

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

log "3/3 end-to-end: pg_regress through psql"
bash "$ROOT/scripts/install_ext.sh"
e2e_data="$RUN/e2e-pgdata"
e2e_port="${FB_TEST_PORT:-5434}"
bash "$ROOT/scripts/pg.sh" stop "$e2e_data" 2>/dev/null || true
rm -rf "$e2e_data" "$RUN/regress"
bash "$ROOT/scripts/pg.sh" start "$e2e_data" "$e2e_port"
trap 'bash "$ROOT/scripts/pg.sh" stop "$e2e_data" >/dev/null 2>&1' EXIT
PGPORT_OVERRIDE="$e2e_port" fb_psql -d postgres -qc "CREATE DATABASE fb_regress"
mkdir -p "$RUN/regress"
tests=$(cd tests/regress/sql && ls *.sql | sed 's/\.sql$//' | sort)
set +e
"$(pg_install)/lib/pgxs/src/test/regress/pg_regress" \
    --use-existing --host=127.0.0.1 --port="$e2e_port" --user=postgres --dbname=fb_regress \
    --bindir="$(pg_install)/bin" --inputdir="$ROOT/tests/regress" --outputdir="$RUN/regress" $tests \
    | tee "$RUN/regress.log"
regress_status=${PIPESTATUS[0]}
if [ "$regress_status" -ne 0 ] && [ -f "$RUN/regress/regression.diffs" ]; then
    cat "$RUN/regress/regression.diffs"
fi
e2e_status=0
for script in concurrent_ingest guard survive; do
    log "end-to-end: tests/e2e/$script.py through real sessions (psycopg)"
    "$VENV/bin/python" "$ROOT/tests/e2e/$script.py" "$e2e_port" "$(pg_install)/bin" | tee "$RUN/$script.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || e2e_status=1
done
set -e
logs=("$RUN/concurrent_ingest.log" "$RUN/guard.log" "$RUN/survive.log")
total=$(( $(echo "$tests" | wc -w) + $(cat "${logs[@]}" | grep -c '^\(not \)\?ok - ' || true) ))
passed=$(( $(grep -c '^ok ' "$RUN/regress.log" || true) + $(cat "${logs[@]}" | grep -c '^ok - ' || true) ))
echo "e2e: $passed passed, $((total - passed)) failed"
[ "$regress_status" -eq 0 ] && [ "$e2e_status" -eq 0 ]
