-- pg_feedback: evaluating retrieval from SQL, through the same fb_retrieve users call.

CREATE TABLE feedback_golden (
    id           bigserial PRIMARY KEY,
    query        text NOT NULL,
    task_type    text NOT NULL,
    added_at     timestamptz NOT NULL DEFAULT now(),
    expected_id  bigint REFERENCES feedback_notes (id)
);
SELECT pg_catalog.pg_extension_config_dump('feedback_golden', '');
SELECT pg_catalog.pg_extension_config_dump('feedback_golden_id_seq', '');
COMMENT ON TABLE feedback_golden IS
    'Golden questions for fb_eval: a query, its task_type, and the id of the note that should come back first, or '
    'NULL when the right answer is no note at all. Note ids never change, so an edited note stays the expected one.';

CREATE TABLE fb_eval_runs (
    id                 bigserial PRIMARY KEY,
    run_at             timestamptz NOT NULL DEFAULT now(),
    run_by             text NOT NULL DEFAULT session_user,
    k                  integer NOT NULL,
    embedding_model    text NOT NULL,
    scored_by          text NOT NULL,
    settings           jsonb NOT NULL,
    questions          integer NOT NULL,
    recall_at_k        real,
    mrr                real,
    ndcg_at_k          real,
    no_answer_correct  real,
    by_task_type       jsonb NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('fb_eval_runs', '');
SELECT pg_catalog.pg_extension_config_dump('fb_eval_runs_id_seq', '');
COMMENT ON TABLE fb_eval_runs IS
    'One row per fb_eval run: when, which models and pg_feedback settings, the overall numbers and the per-task_type '
    'rows. fb_eval_history compares each run with the previous one.';

CREATE FUNCTION fb_eval(k integer DEFAULT 3, record boolean DEFAULT true, model text DEFAULT NULL)
    RETURNS TABLE (task_type text, questions integer, answerable integer, recall_at_k real, mrr real,
                   ndcg_at_k real, no_answer integer, no_answer_correct real, embedding_model text, scored_by text)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    key text := _fb_resolve_model(model);
    scorer text := CASE WHEN current_setting('pg_feedback.rerank')::boolean AND fb_rerank_model() <> ''
                        THEN 'cross-encoder' ELSE 'cosine' END;
    result jsonb;
BEGIN
    IF k IS NULL OR k < 1 OR k > 1000 THEN
        RAISE EXCEPTION 'k must be between 1 and 1000, not %', k
            USING ERRCODE = 'invalid_parameter_value', HINT = 'k is the cut-off of recall@k and nDCG@k, e.g. 3.';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM feedback_golden) THEN
        RAISE EXCEPTION 'feedback_golden is empty'
            USING ERRCODE = 'no_data_found',
                  HINT = 'Insert golden questions: (query, task_type, expected_id), expected_id NULL when no note should come back.';
    END IF;

    WITH answers AS (
        SELECT g.task_type, g.expected_id,
               (SELECT array_agg(r.id ORDER BY r.rank)
                  FROM fb_retrieve(g.query, g.task_type, greatest(20, k), k, model => key) r) AS got
          FROM feedback_golden g
    ), scored AS (
        SELECT _fb_task_type(a.task_type) AS task_type, a.expected_id IS NOT NULL AS answerable,
               array_position(a.got, a.expected_id) AS pos, coalesce(cardinality(a.got), 0) = 0 AS empty
          FROM answers a
    ), rows AS (
        SELECT coalesce(s.task_type, '(all)') AS task_type,
               count(*)::integer AS questions,
               count(*) FILTER (WHERE s.answerable)::integer AS answerable,
               (avg(CASE WHEN s.pos IS NOT NULL THEN 1 ELSE 0 END) FILTER (WHERE s.answerable))::real AS recall_at_k,
               (avg(coalesce(1.0 / s.pos, 0)) FILTER (WHERE s.answerable))::real AS mrr,
               (avg(coalesce(1 / log(2, s.pos + 1), 0)) FILTER (WHERE s.answerable))::real AS ndcg_at_k,
               count(*) FILTER (WHERE NOT s.answerable)::integer AS no_answer,
               (avg(CASE WHEN s.empty THEN 1 ELSE 0 END) FILTER (WHERE NOT s.answerable))::real AS no_answer_correct,
               grouping(s.task_type) AS overall
          FROM scored s
         GROUP BY GROUPING SETS ((s.task_type), ())
    )
    SELECT jsonb_agg(to_jsonb(r) - 'overall' ORDER BY r.overall, r.task_type) INTO result FROM rows r;

    IF record THEN
        INSERT INTO fb_eval_runs (k, embedding_model, scored_by, settings, questions, recall_at_k, mrr, ndcg_at_k,
                                  no_answer_correct, by_task_type)
        SELECT k, key, scorer,
               (SELECT jsonb_object_agg(name, setting) FROM pg_settings WHERE name LIKE 'pg_feedback.%'),
               (o ->> 'questions')::integer, (o ->> 'recall_at_k')::real, (o ->> 'mrr')::real,
               (o ->> 'ndcg_at_k')::real, (o ->> 'no_answer_correct')::real,
               (SELECT jsonb_agg(e) FROM jsonb_array_elements(result) e WHERE e ->> 'task_type' <> '(all)')
          FROM jsonb_array_elements(result) o
         WHERE o ->> 'task_type' = '(all)';
    END IF;

    RETURN QUERY
    SELECT x.task_type, x.questions, x.answerable, x.recall_at_k, x.mrr, x.ndcg_at_k, x.no_answer,
           x.no_answer_correct, key, scorer
      FROM jsonb_to_recordset(result) AS x(task_type text, questions integer, answerable integer, recall_at_k real,
                                           mrr real, ndcg_at_k real, no_answer integer, no_answer_correct real);
END $$;

COMMENT ON FUNCTION fb_eval(integer, boolean, text) IS
    'Scores retrieval on feedback_golden through fb_retrieve (same settings users get): per task_type and overall '
    '("(all)", last row), recall@k, MRR and nDCG@k over questions that expect a note, and for questions that expect '
    'none the share that got zero rows. Records the run in fb_eval_runs unless record => false. model => a model '
    'in the standby slot scores its vectors (fb_reembed) before fb_switch_model makes it the active one.';

CREATE FUNCTION fb_eval_ann(sample integer DEFAULT 100, k integer DEFAULT 20)
    RETURNS TABLE (task_type text, queries integer, recall real, ann_returned real)
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        WITH queries AS (
            SELECT n.task_type, _fb_vector(n, a.slot) AS embedding
              FROM feedback_notes n CROSS JOIN _fb_active() a
             WHERE n.status = 'active' AND _fb_has_vector(n, a.slot, a.model)
             ORDER BY random()
             LIMIT sample
        ), per_query AS (
            SELECT q.task_type,
                   (SELECT array_agg(c.id) FROM _fb_candidates(q.embedding, q.task_type, k, 'exact') c) AS exact,
                   (SELECT array_agg(c.id) FROM _fb_candidates(q.embedding, q.task_type, k, 'ann') c) AS ann
              FROM queries q
        )
        SELECT coalesce(p.task_type, '(all)'),
               count(*)::integer,
               avg((SELECT count(*) FROM unnest(p.ann) a WHERE a = ANY (p.exact))::real / cardinality(p.exact))::real,
               avg(coalesce(cardinality(p.ann), 0))::real
          FROM per_query p
         GROUP BY GROUPING SETS ((p.task_type), ())
         ORDER BY grouping(p.task_type), 1;
    END;

COMMENT ON FUNCTION fb_eval_ann(integer, integer) IS
    'Recall of the ANN stage against exact search: for sample random active notes (their embeddings as queries), '
    'the share of the k exact nearest notes of the same task_type that the HNSW path (iterative scan) also returns, '
    'per task_type and overall, and how many it returned on average.';

CREATE VIEW fb_eval_history AS
SELECT r.id, r.run_at, r.k, r.embedding_model, r.scored_by, r.questions, r.recall_at_k, r.mrr, r.ndcg_at_k,
       r.no_answer_correct,
       r.recall_at_k - lag(r.recall_at_k) OVER w AS recall_change,
       r.mrr - lag(r.mrr) OVER w AS mrr_change,
       r.no_answer_correct - lag(r.no_answer_correct) OVER w AS no_answer_change
  FROM fb_eval_runs r
WINDOW w AS (PARTITION BY r.k ORDER BY r.run_at, r.id);

COMMENT ON VIEW fb_eval_history IS
    'Every fb_eval run with its overall numbers and the change from the previous run with the same k.';
