-- Notes: COPY and bulk INSERT embed in the same transaction, re-submitting never duplicates.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_feedback CASCADE;
RESET client_min_messages;
\getenv abs_srcdir PG_ABS_SRCDIR
\set sample :abs_srcdir '/../../data/sample_notes.csv'

BEGIN;
COPY feedback_notes (task_type, wrong_answer, correction, lesson, source) FROM :'sample' WITH (FORMAT csv, HEADER true);
SELECT task_type, count(*) AS notes, bool_and(abs(vector_norm(embedding) - 1) < 1e-4) AS embedded
  FROM feedback_notes GROUP BY 1 ORDER BY 1;
-- The same file again: every note is updated (report_count 2), none added.
COPY feedback_notes (task_type, wrong_answer, correction, lesson, source) FROM :'sample' WITH (FORMAT csv, HEADER true);
SELECT count(*) AS notes, min(report_count), max(report_count) FROM feedback_notes;

-- A paraphrase of a sample lesson finds that note among the nearest three (the top three are within 0.02).
SELECT lesson
  FROM (SELECT lesson
          FROM feedback_notes, fb_embed_query('The user id from the URL is glued into the SELECT string, is that injectable?') AS q
         WHERE task_type = 'sql_injection_scan' AND status = 'active'
         ORDER BY embedding <=> q
         LIMIT 3) s
 WHERE lesson LIKE 'Numeric-looking input%';
ROLLBACK;

-- 1,000 notes in one INSERT ... SELECT: one transaction, all embedded, unit norm, 384 wide. These lessons differ
-- only by a number, so near-duplicate merging is off here (it has its own test below).
SET pg_feedback.dup_threshold = 1;
INSERT INTO feedback_notes (task_type, wrong_answer, correction, lesson, source)
SELECT 'perf_review', 'looked fine', 'Batch the lookups for item ' || g,
       'Item ' || g || ': load related rows in one query, not one per row', 'bulk_test'
  FROM generate_series(1, 1000) g;
SELECT count(*) AS notes,
       bool_and(vector_dims(embedding) = 384 AND abs(vector_norm(embedding) - 1) < 1e-4) AS all_unit_384,
       count(DISTINCT embedding_model) AS models
  FROM feedback_notes WHERE source = 'bulk_test';
-- The same 1,000 again add no row.
INSERT INTO feedback_notes (task_type, wrong_answer, correction, lesson, source)
SELECT 'perf_review', 'looked fine', 'Batch the lookups for item ' || g,
       'Item ' || g || ': load related rows in one query, not one per row', 'bulk_test'
  FROM generate_series(1, 1000) g;
SELECT count(*) AS notes, sum(report_count) AS reports FROM feedback_notes WHERE source = 'bulk_test';
RESET pg_feedback.dup_threshold;

-- fb_ingest: inserted, then updated (normalisation makes these the same note).
SELECT action FROM fb_ingest('secrets_scan', 'fixture key is fine', 'Rotate the key and use a fake one',
                             'Live credentials in test fixtures are leaked secrets.');
SELECT action FROM fb_ingest(' Secrets_Scan ', 'still fine?', 'Rotate the key  and use a fake one',
                             'Live credentials in test fixtures are leaked secrets.', 'import');
SELECT task_type, report_count, source, wrong_answer FROM feedback_notes WHERE task_type = 'secrets_scan';

-- Deprecation is a soft delete.
SELECT fb_deprecate(id) FROM feedback_notes WHERE task_type = 'secrets_scan';
SELECT status, count(*) FROM feedback_notes GROUP BY 1 ORDER BY 1;

-- Bad input: a clear error, and the table is unchanged.
\set SHOW_CONTEXT never
SELECT * FROM fb_ingest('perf_review', '', 'a correction', '   ');
SELECT * FROM fb_ingest(NULL, '', 'a correction', 'a lesson');
SELECT count(*) FROM feedback_notes;

-- Model settings are superuser-only.
CREATE ROLE fb_regress_user;
GRANT SELECT ON feedback_notes TO fb_regress_user;
SET ROLE fb_regress_user;
SET pg_feedback.model_dir = '/tmp';
SET pg_feedback.onnxruntime_library = '/tmp/evil.so';
SELECT count(*) > 0 AS can_read FROM feedback_notes;
RESET ROLE;
DROP OWNED BY fb_regress_user;
DROP ROLE fb_regress_user;

DROP EXTENSION pg_feedback;
