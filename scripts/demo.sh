#!/usr/bin/env bash
# make demo: set-up, build + install, start Postgres on 127.0.0.1:$FB_PORT, create database "feedback" with
# pg_feedback and the sample notes, run one retrieval, and leave the server running.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bash "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/install_ext.sh"
bash "$ROOT/scripts/pg.sh" start "$PGDATA_DEMO" "$FB_PORT"

if [ "$(fb_psql -d postgres -tAc "SELECT count(*) FROM pg_database WHERE datname = 'feedback'")" = 0 ]; then
    fb_psql -d postgres -qc "CREATE DATABASE feedback"
fi
if [ -f "$RUN/extension-changed" ]; then
    # A new build: recreate the extension in the demo database (its notes are the sample, reloaded below).
    fb_psql -d feedback -qc "DROP EXTENSION IF EXISTS pg_feedback CASCADE" 2>/dev/null
    rm -f "$RUN/extension-changed"
fi
fb_psql -d feedback -qc "SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS pg_feedback CASCADE"

if [ "$(fb_psql -d feedback -tAc "SELECT count(*) FROM feedback_notes WHERE source = 'sample'")" = 0 ]; then
    log "loading the sample notes (COPY: embedded in batched model runs by the insert trigger)"
    fb_psql -d feedback -qc "\\copy feedback_notes (task_type, wrong_answer, correction, lesson, source) FROM '$ROOT/data/sample_notes.csv' WITH (FORMAT csv, HEADER true)"
    fb_psql -d feedback -q -v sample_contexts="$ROOT/data/sample_contexts.csv" -f "$ROOT/data/load_contexts.sql"
fi

if [ "$(fb_psql -d feedback -tAc "SELECT count(*) FROM feedback_golden")" = 0 ]; then
    log "loading the golden questions and code inputs with their graded judgments for fb_eval and fb_calibrate"
    fb_psql -d feedback -q -v golden_questions="$ROOT/data/golden_questions.csv" \
        -v golden_judgments="$ROOT/data/golden_judgments.csv" -f "$ROOT/data/load_golden.sql" \
        -v golden_code="$ROOT/data/golden_code" -f "$ROOT/data/load_golden_code.sql"
fi

fb_psql -d feedback <<'SQL'
\pset footer off
SELECT task_type, count(*) AS notes FROM feedback_notes GROUP BY 1 ORDER BY 1;
\echo 'Retrieval by embedding similarity for: "The user id from the URL is glued into the SELECT string, is that injectable?"'
SELECT round((1 - (embedding <=> q.v))::numeric, 3) AS similarity, lesson
  FROM feedback_notes,
       (SELECT fb_embed_query('The user id from the URL is glued into the SELECT string, is that injectable?') AS v) q
 WHERE task_type = 'sql_injection_scan' AND status = 'active'
 ORDER BY embedding <=> q.v
 LIMIT 3;
SQL
log "demo running: make psql opens psql on database feedback (127.0.0.1:$FB_PORT); make stop stops it"
log "try: SELECT * FROM fb_retrieve('is this query injectable?', 'sql_injection_scan');  SELECT * FROM fb_eval();"
