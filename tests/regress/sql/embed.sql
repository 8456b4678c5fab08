-- Embedding through a real client: shapes, strictness, similarity, and errors with their hints.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_feedback CASCADE;
RESET client_min_messages;

SELECT vector_dims(fb_embed('The query is parameterized')) AS dims,
       abs(vector_norm(fb_embed_query('is it parameterized?')) - 1) < 1e-4 AS unit_norm,
       fb_embed(NULL) IS NULL AS null_in_null_out;

-- A paraphrase is closer than an unrelated sentence.
SELECT fb_embed('The query is parameterized') <=> fb_embed('this uses a bound placeholder')
     < fb_embed('The query is parameterized') <=> fb_embed('delete the user account') AS paraphrase_is_closer;

SELECT cardinality(fb_embed_batch(ARRAY['one', NULL, 'three'])) AS n,
       (fb_embed_batch(ARRAY['one', NULL, 'three']))[2] IS NULL AS null_kept;

-- Truncation, not an error, for inputs past the model's limit.
SELECT vector_dims(fb_embed(repeat('very long input ', 2000))) AS long_input_dims,
       fb_count_tokens(repeat('very long input ', 2000)) > 512 AS longer_than_limit;

SELECT name, kind, dimensions, pooling, max_tokens FROM fb_models() ORDER BY name;

-- The other embedding model, selected by a setting.
SET pg_feedback.embedding_model = 'all-MiniLM-L6-v2';
SELECT split_part(fb_embedding_model(), '@', 1) AS model, fb_embedding_model() ~ '@[0-9a-f]{64}$' AS pinned_by_sha256,
       vector_dims(fb_embed('mean pooled')) AS dims;
RESET pg_feedback.embedding_model;

-- Errors: a SQLSTATE, the bad value, a hint naming the setting.
CREATE FUNCTION pg_temp.sqlstate_of(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;
\set SHOW_CONTEXT never
SET pg_feedback.embedding_model = '../../etc/passwd';
SELECT fb_embed('x');
SELECT pg_temp.sqlstate_of($$SELECT fb_embed('x')$$);
SET pg_feedback.embedding_model = 'ms-marco-MiniLM-L-12-v2';
SELECT fb_embed('x');
SELECT pg_temp.sqlstate_of($$SELECT fb_embed('x')$$);
SET pg_feedback.embedding_model = 'no-such-model';
\set VERBOSITY terse
SELECT fb_embed('x');
\set VERBOSITY default
SELECT pg_temp.sqlstate_of($$SELECT fb_embed('x')$$);
RESET pg_feedback.embedding_model;
SET pg_feedback.rerank_model = 'bge-small-en-v1.5';
SELECT fb_rerank('q', ARRAY['p']);
RESET pg_feedback.rerank_model;

-- Cross-encoder scores, in input order, NULL for NULL.
SELECT s[1] > s[3] + 5 AS relevant_scores_higher, s[2] IS NULL AS null_kept
  FROM fb_rerank('is this sql injectable?',
                 ARRAY['String-concatenated SQL is injectable.', NULL, 'The weather is nice today.']) AS s;
