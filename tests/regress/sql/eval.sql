-- Evaluation from SQL on the project's golden set: the numbers come from fb_retrieve itself.
-- make test fails here if recall@3 on the golden set drops below 0.85 (measured: 0.867 at the default floor).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_feedback CASCADE;
RESET client_min_messages;
\getenv abs_srcdir PG_ABS_SRCDIR
\set sample :abs_srcdir '/../../data/sample_notes.csv'
\set golden :abs_srcdir '/../../data/golden_questions.csv'
COPY feedback_notes (task_type, wrong_answer, correction, lesson, source) FROM :'sample' WITH (FORMAT csv, HEADER true);
CREATE TEMP TABLE golden_csv (question text, task_type text, expected_lesson text);
COPY golden_csv FROM :'golden' WITH (FORMAT csv, HEADER true);
INSERT INTO feedback_golden (query, task_type, expected_id)
SELECT g.question, g.task_type, n.id
  FROM golden_csv g LEFT JOIN feedback_notes n ON n.lesson = g.expected_lesson AND n.task_type = g.task_type;
SELECT count(*) AS questions, count(expected_id) AS answerable,
       count(*) FILTER (WHERE expected_id IS NULL) AS expect_no_note
  FROM feedback_golden;

-- The floors: recall@3 >= 0.85, and at least 80% of no-answer questions get zero rows.
SELECT task_type, questions, answerable, no_answer, split_part(embedding_model, '@', 1) AS embedding_model, scored_by,
       recall_at_k >= 0.85 AS recall_at_3_above_floor, no_answer_correct >= 0.80 AS no_answer_above_floor,
       mrr <= recall_at_k AND ndcg_at_k BETWEEN mrr AND recall_at_k AS metrics_consistent
  FROM fb_eval(3)
 WHERE task_type = '(all)';

-- The run is recorded (with every task_type's row), and the history compares runs.
SELECT count(*) AS runs, bool_and(settings ? 'pg_feedback.rerank_floor') AS settings_kept,
       bool_and(jsonb_array_length(by_task_type) = 8) AS per_task_type_kept
  FROM fb_eval_runs;
-- Ranking by cosine alone (no cross-encoder): its own floor, and it says so.
SET pg_feedback.rerank = off;
SELECT scored_by, recall_at_k >= 0.65 AS cosine_recall_above_065 FROM fb_eval(3) WHERE task_type = '(all)';
RESET pg_feedback.rerank;
SELECT scored_by, recall_change IS NOT NULL AS compared_with_previous FROM fb_eval_history ORDER BY id;

-- The ANN stage against exact search (forced HNSW path on every task_type).
SELECT task_type, queries, recall >= 0.95 AS recall_above_095, ann_returned = 20 AS full_candidates
  FROM fb_eval_ann(50) WHERE task_type = '(all)';

\set SHOW_CONTEXT never
SELECT * FROM fb_eval(0);
TRUNCATE feedback_golden;
SELECT * FROM fb_eval();
DROP EXTENSION pg_feedback;
