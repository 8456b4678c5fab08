-- Evaluation and calibration from SQL on the project's golden set: the numbers come from fb_retrieve itself.
-- fb_calibrate chooses the settings on the tune split; make test fails here if, on the test split, recall@3
-- drops below 0.56, precision of injected notes below 0.58 or the no-answer share below 0.65: the tune split's
-- numbers (0.656, 0.672, 0.750) less about two standard errors of a share over the test split's 121
-- answerable questions, ~100 injected notes and 84 no-answer questions (0.09-0.10) (README, "Calibration").
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_feedback CASCADE;
RESET client_min_messages;
\getenv abs_srcdir PG_ABS_SRCDIR
\set sample :abs_srcdir '/../../data/sample_notes.csv'
\set golden_questions :abs_srcdir '/../../data/golden_questions.csv'
\set golden_judgments :abs_srcdir '/../../data/golden_judgments.csv'
\set load_golden :abs_srcdir '/../../data/load_golden.sql'
COPY feedback_notes (task_type, wrong_answer, correction, lesson, source) FROM :'sample' WITH (FORMAT csv, HEADER true);
\i :load_golden
SELECT split, count(*) AS questions, count(DISTINCT task_type) AS task_types,
       count(*) FILTER (WHERE EXISTS (SELECT 1 FROM feedback_golden_judgments j
                                       WHERE j.golden_id = g.id AND j.grade >= 1)) AS answerable
  FROM feedback_golden g GROUP BY split ORDER BY split;
SELECT grade, count(*) AS judgments FROM feedback_golden_judgments GROUP BY grade ORDER BY grade;

-- Calibration on the tune split writes one row for all task_types ('*'): at about 26 tune questions per
-- task_type, per-task_type rows would fit noise (they need min_questions, 50 by default).
SELECT task_type, questions, rerank, max_notes BETWEEN 1 AND 3 AS max_notes_ok,
       recall_at_3 >= 0.56 AS tune_recall_ok, "precision" >= 0.58 AS tune_precision_ok, utility > 0 AS pays_off
  FROM fb_calibrate();
SELECT task_type, rerank_max_pairs BETWEEN 1 AND 20 AS pairs_bounded, rerank_tie_margin >= 0 AS margin_set,
       calibration ->> 'split' AS split, (calibration -> 'selective' ->> 'mean_pairs')::real < 20 AS selective
  FROM feedback_retrieval_settings;

-- The gates, on the test split (never used to choose anything).
SELECT task_type, questions, answerable, no_answer, split_part(embedding_model, '@', 1) AS embedding_model, scored_by,
       recall_at_k >= 0.56 AS recall_at_3_above_gate, "precision" >= 0.58 AS precision_above_gate,
       no_answer_correct >= 0.65 AS no_answer_above_gate, mean_injected <= 1 AS at_most_one_note_on_average,
       mrr <= recall_at_k AND ndcg_at_k <= 1 AND misled_share <= 1 AS metrics_consistent
  FROM fb_eval(3, split => 'test')
 WHERE kind = '(all)';

-- The run is recorded (with every task_type's row and the split), and the history compares runs.
SELECT count(*) AS runs, bool_and(settings ? 'pg_feedback.rerank_floor') AS settings_kept,
       bool_and((SELECT count(*) FROM jsonb_array_elements(by_task_type) e WHERE e ->> 'task_type' <> '(all)') = 8) AS per_task_type_kept, min(split) AS split,
       bool_and("precision" IS NOT NULL) AS precision_kept
  FROM fb_eval_runs;
-- Ranking by cosine alone (no cross-encoder): its own calibrated cut, and it says so.
SET pg_feedback.rerank = off;
SELECT scored_by, recall_at_k >= 0.40 AS cosine_recall_above_040 FROM fb_eval(3, split => 'test')
 WHERE kind = '(all)';
RESET pg_feedback.rerank;
SELECT scored_by, split, recall_change IS NULL AS first_of_its_kind FROM fb_eval_history ORDER BY id;

-- The ANN stage against exact search (forced HNSW path on every task_type).
SELECT task_type, queries, recall >= 0.95 AS recall_above_095, ann_returned = 20 AS full_candidates
  FROM fb_eval_ann(50) WHERE task_type = '(all)';

-- Closing the loop: with the log on, a retrieval is recorded (query redacted) and a reviewer's judgment feeds the
-- golden set and the per-note view.
SET pg_feedback.log_retrievals = on;
CREATE TEMP TABLE got AS
SELECT * FROM fb_retrieve('The id from the URL is concatenated into the SQL, injectable? '
                          'token ghp_abcdefghijklmnopqrstuvwxyz0123456789', 'sql_injection_scan');
SELECT count(*) AS returned, count(retrieval_id) AS logged FROM got;
SELECT r.task_type, cardinality(r.note_ids) AS notes, r.scored_by, r.query LIKE '%ghp_abcdef%' AS secret_kept,
       r.note_ids[1] = (SELECT id FROM got WHERE rank = 1) AS ids_logged
  FROM feedback_retrievals r;
-- Least privilege: a reviewer judges; a reader can neither judge nor log a retrieval fb_retrieve would not have
-- returned to it (note 1 is a sql_injection_scan note, not a perf_review one).
\set SHOW_CONTEXT never
CREATE ROLE regress_fb_reader IN ROLE feedback_reader;
CREATE ROLE regress_fb_reviewer IN ROLE feedback_reviewer;
GRANT SELECT ON got TO regress_fb_reader, regress_fb_reviewer;
SET ROLE regress_fb_reader;
SELECT fb_judge(retrieval_id, id, false) FROM got WHERE rank = 1;
SELECT _fb_log_retrieval('q', 'perf_review', ARRAY[1]::bigint[], ARRAY[9]::real[], 'cross-encoder', 'm', NULL);
RESET ROLE;
SET ROLE regress_fb_reviewer;
SELECT fb_judge(retrieval_id, id, false) IS NOT NULL AS judged_into_golden FROM got WHERE rank = 1;
RESET ROLE;
SELECT g.source, g.split IN ('tune', 'test') AS split_fixed, j.grade
  FROM feedback_golden g JOIN feedback_golden_judgments j ON j.golden_id = g.id WHERE g.source = 'judged';
SELECT injected, judged, misleading, misleading_share FROM feedback_note_quality;
-- Judging again replaces the judgment; the golden question is not duplicated.
SELECT count(*) AS judged_questions FROM (SELECT fb_judge(retrieval_id, id, true) FROM got WHERE rank = 1) j,
       feedback_golden g WHERE g.source = 'judged';
SELECT helpful, misleading FROM feedback_note_quality;
-- A read-only transaction retrieves without logging.
BEGIN TRANSACTION READ ONLY;
SELECT count(*) > 0 AS returned, count(retrieval_id) AS logged
  FROM fb_retrieve('The id from the URL is concatenated into the SQL, injectable?', 'sql_injection_scan');
COMMIT;
SELECT count(*) AS retrievals FROM feedback_retrievals;
-- fb_eval and fb_calibrate never log their own retrievals.
SELECT count(*) AS rows FROM fb_eval(split => 'tune', record => false) WHERE kind = '(all)';
SELECT count(*) AS retrievals FROM feedback_retrievals;
RESET pg_feedback.log_retrievals;

\set SHOW_CONTEXT never
SELECT fb_judge(12345, 1, true);
SELECT fb_judge((SELECT max(id) FROM feedback_retrievals), -1, true);
SELECT fb_judge(NULL, 1, true);
SELECT * FROM fb_eval(0);
SELECT * FROM fb_eval(split => 'dev');
SELECT * FROM fb_calibrate(lambda => -1);
TRUNCATE feedback_golden CASCADE;
SELECT * FROM fb_eval();
SELECT * FROM fb_calibrate();
DROP TABLE got;
DROP EXTENSION pg_feedback;
DROP ROLE regress_fb_reader, regress_fb_reviewer;
