-- Slice indexes (fb_maintain, feedback_index_status) and the bounded full-text stage, on the sample notes. The
-- sample's task_types hold 25-26 notes, so pg_feedback.slice_index_min is lowered to give them indexes.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_feedback CASCADE;
RESET client_min_messages;
\getenv abs_srcdir PG_ABS_SRCDIR
\set sample :abs_srcdir '/../../data/sample_notes.csv'
COPY feedback_notes (task_type, wrong_answer, correction, lesson, source) FROM :'sample' WITH (FORMAT csv, HEADER true);
ANALYZE feedback_notes;
\set q 'Route param looks like an integer and gets glued into the query string, is that safe?'
CREATE TEMP TABLE before AS
SELECT rank, id FROM fb_retrieve(:'q', 'sql_injection_scan', final_k => 3, min_score => -1e9, rerank => false);

-- No slice index yet: every task_type is searched exactly (below exact_scan_limit).
SELECT search, count(*) AS task_types FROM feedback_index_status GROUP BY search;

-- The default minimum (5,000) builds nothing.
SELECT count(*) AS slices FROM fb_maintain();

-- With a minimum of 26 notes, the three task_types holding 26 get an index; recall is measured on each.
SET pg_feedback.slice_index_min = 26;
SELECT task_type, notes, action, index_name LIKE 'feedback_notes_slice_%' AS named, recall >= 0.9 AS recall_ok
  FROM fb_maintain() ORDER BY task_type;
SELECT task_type, notes, search, index_state, index_bytes > 0 AS has_pages, notes_at_build, recall_queries,
       next_step, build_statement LIKE 'CREATE INDEX CONCURRENTLY % WHERE (task_type = %) IS TRUE AND status = ''active''' AS by_hand
  FROM feedback_index_status WHERE task_type IN ('sql_injection_scan', 'secrets_scan') ORDER BY task_type;
SELECT pg_get_indexdef(to_regclass(index_name)) LIKE '%USING ivfflat (((l2_normalize(embedding))::vector(384)) vector_cosine_ops) WITH (lists=''10'') WHERE (((task_type = ''sql_injection_scan''::text) IS TRUE) AND (status = ''active''::text))' AS predicate
  FROM feedback_slice_indexes WHERE task_type = 'sql_injection_scan';

-- Running it again keeps what is there.
SELECT task_type, action FROM fb_maintain() ORDER BY task_type;

-- Retrieval goes through the slice index (its scan count grows) and returns the same notes as before.
SELECT pg_stat_force_next_flush();
CREATE TEMP TABLE scans AS
SELECT s.idx_scan FROM pg_stat_user_indexes s JOIN feedback_slice_indexes x ON x.index_name = s.indexrelname
 WHERE x.task_type = 'sql_injection_scan';
-- 26 notes: a sequential or bitmap scan costs less than any index here; from a few thousand notes on the planner
-- takes the slice index by itself.
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT (SELECT array_agg(id ORDER BY rank) FROM before)
     = (SELECT array_agg(id ORDER BY rank)
          FROM fb_retrieve(:'q', 'sql_injection_scan', final_k => 3, min_score => -1e9, rerank => false)) AS same_notes;
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT pg_stat_force_next_flush();
SELECT s.idx_scan > (SELECT idx_scan FROM scans) AS slice_index_used
  FROM pg_stat_user_indexes s JOIN feedback_slice_indexes x ON x.index_name = s.indexrelname
 WHERE x.task_type = 'sql_injection_scan';

-- The index path and the exact path agree on these small slices (fb_eval_ann per task_type).
SELECT task_type, queries, recall >= 0.9 AS recall_ok FROM fb_eval_ann(10, 20, 'sql_injection_scan');

-- An index dropped by hand is not used and shows as missing; fb_maintain builds it again.
SELECT format('DROP INDEX %I', index_name) AS drop_it FROM feedback_slice_indexes
 WHERE task_type = 'sql_injection_scan' \gset
:drop_it;
SELECT search, index_state FROM feedback_index_status WHERE task_type = 'sql_injection_scan';
SELECT count(*) AS candidates FROM _fb_candidates(fb_embed_query(:'q'), 'sql_injection_scan', 20);
SELECT task_type, action FROM fb_maintain('sql_injection_scan', measure => false);

-- A slice that has doubled since its index was built gets a new one (its lists no longer fit): recorded as built
-- at 13 notes, sql_injection_scan's index is rebuilt for its 26.
UPDATE feedback_slice_indexes SET notes = 13 WHERE task_type = 'sql_injection_scan';
SELECT task_type, search, next_step FROM feedback_index_status WHERE index_name IS NOT NULL ORDER BY task_type;
SELECT task_type, notes, action FROM fb_maintain(measure => false) ORDER BY task_type;
SELECT notes FROM feedback_slice_indexes WHERE task_type = 'sql_injection_scan';

-- A slice that falls below half the minimum loses its index.
SET pg_feedback.slice_index_min = 60;
SELECT task_type, next_step FROM feedback_index_status WHERE index_name IS NOT NULL ORDER BY task_type;
SELECT task_type, notes, action FROM fb_maintain(measure => false) ORDER BY task_type;
SELECT count(*) AS slice_indexes FROM feedback_slice_indexes;
SELECT count(*) AS indexes_left FROM pg_indexes WHERE indexname LIKE 'feedback_notes_slice_%';
RESET pg_feedback.slice_index_min;

-- Bounded full-text stage. With the default limit nothing is cut on this store: the terms are the question's
-- lexemes, as before. With a limit of 5 estimated matches only the rarest are kept (at least one), and at most 5
-- matches are ranked.
SELECT _fb_lexical_terms(:'q', 'sql_injection_scan', 2000) = _fb_search_terms(:'q') AS all_terms;
SELECT numnode(_fb_search_terms(:'q')) AS all_nodes,
       numnode(_fb_lexical_terms(:'q', 'sql_injection_scan', 5)) < numnode(_fb_search_terms(:'q')) AS fewer,
       numnode(_fb_lexical_terms(:'q', 'sql_injection_scan', 0)) AS one_term;
SET pg_feedback.lexical_rank_limit = 5;
SELECT count(*) <= 5 AS ranked_at_most_5
  FROM _fb_lexical_candidates(fb_embed_query(:'q'), _fb_search_terms(:'q'), 'sql_injection_scan', 20);
RESET pg_feedback.lexical_rank_limit;
SELECT count(*) AS matches
  FROM _fb_lexical_candidates(fb_embed_query(:'q'), _fb_search_terms(:'q'), 'sql_injection_scan', 20);

-- Who may: fb_maintain is the owner's and superusers'; reviewers read the status; readers neither.
CREATE ROLE fb_slices_reviewer IN ROLE feedback_reviewer;
CREATE ROLE fb_slices_reader IN ROLE feedback_reader;
SET ROLE fb_slices_reviewer;
SELECT count(*) > 0 AS reviewer_reads_status FROM feedback_index_status;
\set SHOW_CONTEXT never
SELECT * FROM fb_maintain();
SET ROLE fb_slices_reader;
SELECT count(*) FROM feedback_index_status;
RESET ROLE;
DROP ROLE fb_slices_reviewer;
DROP ROLE fb_slices_reader;

-- Bad input.
SELECT * FROM fb_maintain('   ');
SET pg_feedback.slice_index_min = 0;

DROP EXTENSION pg_feedback;
