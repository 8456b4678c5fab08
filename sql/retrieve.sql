-- pg_feedback: retrieval, near-duplicate lookup and prompt assembly. All read-only: they work in read-only
-- transactions and on hot standbys.

CREATE FUNCTION fb_retrieve(query text, task_type text, candidate_k integer DEFAULT 20, final_k integer DEFAULT 3,
                            min_score real DEFAULT NULL, rerank boolean DEFAULT NULL, model text DEFAULT NULL)
    RETURNS TABLE (rank integer, id bigint, lesson text, correction text, similarity real, rerank_score real,
                   scored_by text, created_at timestamptz)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    key text;
    q vector(384);
    use_rerank boolean;
    cand record;
    scores real[];
    floor real;
    picked integer[];
BEGIN
    IF candidate_k IS NULL OR candidate_k NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'candidate_k must be between 1 and 1000, not %', candidate_k
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Over-fetch about 20 candidates for the reranker.';
    END IF;
    IF final_k IS NULL OR final_k NOT BETWEEN 1 AND candidate_k THEN
        RAISE EXCEPTION 'final_k must be between 1 and candidate_k (%), not %', candidate_k, final_k
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'final_k is how many notes to return, at most the number of candidates.';
    END IF;
    IF query IS NULL OR task_type IS NULL THEN
        RETURN;
    END IF;
    -- Embedded in its own step, through the backend's query cache; first, so that the library is loaded and its
    -- settings defined before they are read. Only notes embedded by the same model are compared with it.
    key := _fb_resolve_model(model);
    q := (fb_embed_batch(ARRAY[query], true, key))[1];
    use_rerank := coalesce(rerank, current_setting('pg_feedback.rerank')::boolean) AND fb_rerank_model() <> '';
    SELECT array_agg(c.id ORDER BY c.distance, c.id) AS ids,
           array_agg(c.lesson ORDER BY c.distance, c.id) AS lessons,
           array_agg(c.correction ORDER BY c.distance, c.id) AS corrections,
           array_agg(c.lesson || ' ' || c.correction ORDER BY c.distance, c.id) AS passages,
           array_agg((1 - c.distance)::real ORDER BY c.distance, c.id) AS sims,
           array_agg(c.created_at ORDER BY c.distance, c.id) AS created
      INTO cand
      FROM _fb_candidates(q, _fb_task_type(fb_retrieve.task_type), candidate_k, model => key) c;
    IF cand.ids IS NULL THEN
        RETURN;   -- no notes for this task_type: zero rows is a normal answer
    END IF;

    IF use_rerank THEN
        -- The cross-encoder reads lesson and correction together: on the golden questions that beat the
        -- lesson alone (recall@3 0.911 vs 0.813 before any floor; results/floor_calibration.md).
        scores := fb_rerank(query, cand.passages);
        floor := coalesce(min_score, current_setting('pg_feedback.rerank_floor')::real);
    ELSE
        scores := cand.sims;
        floor := coalesce(min_score, current_setting('pg_feedback.cosine_floor')::real);
    END IF;
    picked := _fb_rank(scores, cand.created, floor, use_rerank, final_k);

    RETURN QUERY
    SELECT p.n::integer, cand.ids[p.i], cand.lessons[p.i], cand.corrections[p.i], cand.sims[p.i],
           CASE WHEN use_rerank THEN scores[p.i] END,
           CASE WHEN use_rerank THEN 'cross-encoder' ELSE 'cosine' END,
           cand.created[p.i]
      FROM unnest(picked) WITH ORDINALITY AS p(i, n)
     ORDER BY p.n;
END $$;

COMMENT ON FUNCTION fb_retrieve(text, text, integer, integer, real, boolean, text) IS
    'The notes that apply to a question, best first, or none. Embeds the query (cached per backend), takes the '
    'candidate_k nearest active notes of the task_type, reranks them with the cross-encoder (unless rerank => false, '
    'pg_feedback.rerank = off or no pg_feedback.rerank_model), keeps those scoring at least min_score (default: '
    'pg_feedback.rerank_floor, a logit; or pg_feedback.cosine_floor when ranking by cosine) and returns the best '
    'final_k; a newer note ranks first on a near tie (pg_feedback.tie_margin). scored_by says which score ranked. '
    'Only notes embedded by the active model are searched; model => a model held in the standby slot (fb_reembed) '
    'searches its vectors instead, to try it before fb_switch_model. Never writes.';

CREATE FUNCTION fb_find_duplicate(task_type text, lesson text)
    RETURNS TABLE (id bigint, lesson text, similarity real, would_merge boolean)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT c.id, c.lesson, (1 - c.distance)::real,
               1 - c.distance >= current_setting('pg_feedback.dup_threshold')::double precision
                   AND current_setting('pg_feedback.dup_threshold')::double precision < 1
          FROM _fb_candidates(fb_embed(fb_document_text(fb_find_duplicate.task_type, fb_find_duplicate.lesson)),
                              _fb_task_type(fb_find_duplicate.task_type), 1) c;
    END;

COMMENT ON FUNCTION fb_find_duplicate(text, text) IS
    'The active note of the task_type nearest to a lesson (active model), its cosine similarity, and whether ingesting the lesson '
    'would merge into it (similarity >= pg_feedback.dup_threshold).';

CREATE FUNCTION fb_build_prompt(query text, task_type text,
                                base_instructions text DEFAULT
                                    'You are a careful code reviewer. Apply the lessons from prior reviewer '
                                    'corrections below where they are relevant to the task.',
                                max_context_tokens integer DEFAULT 800)
    RETURNS text
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT _fb_build_prompt(base_instructions,
                                coalesce(array_agg(r.lesson ORDER BY r.rank), '{}'),
                                coalesce(array_agg(r.correction ORDER BY r.rank), '{}'),
                                max_context_tokens)
          FROM fb_retrieve(query, task_type) r;
    END;

COMMENT ON FUNCTION fb_build_prompt(text, text, text, integer) IS
    'A prompt: base_instructions, then the retrieved lessons numbered in rank order inside '
    '<prior_corrections> ... </prior_corrections> (as many as fit max_context_tokens, counted with the embedding '
    'model''s tokenizer over the whole block), then the instruction to treat the block as untrusted reference data. '
    'Angle brackets and look-alikes in note text are escaped so no note can close or reopen the fence. '
    '"(no relevant prior corrections)" when nothing passes the floor.';

COMMENT ON FUNCTION fb_rerank_model() IS 'The configured cross-encoder (pg_feedback.rerank_model); empty: none.';
COMMENT ON FUNCTION _fb_rank(real[], timestamptz[], real, boolean, integer) IS
    'Internal: positions of the notes fb_retrieve returns, in rank order (floor, best first, newer first on near ties).';
COMMENT ON FUNCTION _fb_build_prompt(text, text[], text[], integer) IS
    'Internal: assembles fb_build_prompt''s text from ranked lessons and corrections.';
