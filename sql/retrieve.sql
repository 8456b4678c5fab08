-- pg_feedback: retrieval, near-duplicate lookup and prompt assembly. They work in read-only transactions and on
-- hot standbys; the only write is the opt-in retrieval log (pg_feedback.log_retrievals), skipped there.

-- Calibrated retrieval settings, per task_type or for all ('*'). fb_calibrate writes them; a NULL column (or no
-- row) falls back to the '*' row, then to the pg_feedback.* setting of the same name.
CREATE TABLE feedback_retrieval_settings (
    task_type            text PRIMARY KEY,
    rerank               boolean,
    rerank_floor         real,
    relative_cut         real,
    max_notes            integer CHECK (max_notes >= 1),
    cosine_floor         real,
    cosine_relative_cut  real,
    cosine_max_notes     integer CHECK (cosine_max_notes >= 1),
    rerank_max_pairs     integer CHECK (rerank_max_pairs >= 1),
    rerank_min_cosine    real,
    rerank_cosine_gap    real,
    rerank_decided       real,
    rerank_decided_gap   real,
    rerank_tie_margin    real CHECK (rerank_tie_margin >= 0),
    cosine_tie_margin    real CHECK (cosine_tie_margin >= 0),
    embedding_model      text,
    rerank_model         text,
    calibrated_at        timestamptz NOT NULL DEFAULT now(),
    calibrated_by        text NOT NULL DEFAULT session_user,
    calibration          jsonb NOT NULL DEFAULT '{}',
    decision             jsonb
);
SELECT pg_catalog.pg_extension_config_dump('feedback_retrieval_settings', '');
COMMENT ON TABLE feedback_retrieval_settings IS
    'How fb_retrieve cuts and reranks, per task_type (''*'': every task_type without its own row), as fb_calibrate '
    'chose it on golden questions: whether reranking pays off, floors, relative cuts (drop notes scoring this far '
    'below the best), most notes returned, the selective-reranking bounds and the near-tie margins, with the '
    'models and the numbers it was chosen on (calibration); on the ''*'' row, decision: the learned final '
    'decision for code inputs fb_calibrate fitted (NULL: the shipped one). A NULL column falls back to the ''*'' row, then to '
    'the pg_feedback.* setting of the same name. A row whose embedding_model is not the model searched, or whose '
    'rerank_model is not pg_feedback.rerank_model, does not apply (its floors and bounds are in another model''s '
    'scale). Delete the rows to go back to the settings.';

CREATE FUNCTION _fb_settings_metadata() RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, pg_temp
    RETURN ARRAY['task_type', 'embedding_model', 'rerank_model', 'calibrated_at', 'calibrated_by', 'calibration',
                 'decision'];
COMMENT ON FUNCTION _fb_settings_metadata() IS
    'Internal: the columns of feedback_retrieval_settings that say where a row comes from, not how to retrieve.';

-- One value that _fb_rank_notes and _fb_rerank_selective read whole (feedback_core::rank::settings). A row
-- calibrated with another embedding model or cross-encoder does not apply: its floors and bounds are in that
-- model's scale.
CREATE FUNCTION _fb_settings(p_task_type text, p_model text) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, pg_temp
    BEGIN ATOMIC
        SELECT m || jsonb_build_object('rerank', (m ->> 'rerank_enabled')::boolean
                                                 AND coalesce((m ->> 'rerank')::boolean, true))
          FROM (SELECT _fb_retrieval_gucs()
                       || coalesce(jsonb_strip_nulls(to_jsonb(d)) - _fb_settings_metadata(), '{}')
                       || coalesce(jsonb_strip_nulls(to_jsonb(t)) - _fb_settings_metadata(), '{}') AS m
                  FROM (VALUES (1)) AS one (x)
                  LEFT JOIN feedback_retrieval_settings t
                         ON t.task_type = p_task_type AND (t.embedding_model IS NULL OR t.embedding_model = p_model)
                        AND (t.rerank_model IS NULL OR t.rerank_model = fb_rerank_model())
                  LEFT JOIN feedback_retrieval_settings d
                         ON d.task_type = '*' AND (d.embedding_model IS NULL OR d.embedding_model = p_model)
                        AND (d.rerank_model IS NULL OR d.rerank_model = fb_rerank_model())) merged;
    END;
COMMENT ON FUNCTION _fb_settings(text, text) IS
    'Internal: the retrieval settings in force for a task_type and embedding model key, as one jsonb keyed by the '
    'columns of feedback_retrieval_settings: pg_feedback.* settings, then the ''*'' row, then the task_type''s row '
    '(each only if calibrated with that embedding model and the configured cross-encoder or with none named; NULL '
    'columns fall through); pg_feedback.rerank = off turns reranking off everywhere.';

-- Opt-in retrieval log (pg_feedback.log_retrievals), what fb_judge and feedback_note_quality read.
CREATE TABLE feedback_retrievals (
    id               bigserial PRIMARY KEY,
    retrieved_at     timestamptz NOT NULL DEFAULT now(),
    retrieved_by     text NOT NULL DEFAULT session_user,
    query            text NOT NULL,
    task_type        text NOT NULL,
    note_ids         bigint[] NOT NULL,
    scores           real[] NOT NULL,
    scored_by        text NOT NULL,
    embedding_model  text NOT NULL,
    rerank_model     text,
    CHECK (cardinality(note_ids) = cardinality(scores))
);
CREATE INDEX feedback_retrievals_retrieved_at_idx ON feedback_retrievals (retrieved_at);
CREATE INDEX feedback_retrievals_note_ids_idx ON feedback_retrievals USING gin (note_ids);
SELECT pg_catalog.pg_extension_config_dump('feedback_retrievals', '');
SELECT pg_catalog.pg_extension_config_dump('feedback_retrievals_id_seq', '');
COMMENT ON TABLE feedback_retrievals IS
    'One row per fb_retrieve call while pg_feedback.log_retrievals is on (never on a hot standby or in a '
    'read-only transaction): when, by whom, the query with secrets redacted (fb_redact), the task_type, the '
    'returned note ids in rank order with the scores that ranked them, scored_by, and the models. fb_judge marks '
    'returned notes helpful or misleading.';

-- Only fb_retrieve (SECURITY DEFINER) calls it: no role is granted EXECUTE, so the log holds only what
-- fb_retrieve computed. As a second line it accepts only what fb_retrieve could have returned to the acting role:
-- active notes of that task_type it may see, at most 1000 of them, one score each, a known scorer.
CREATE FUNCTION _fb_log_retrieval(query text, task_type text, note_ids bigint[], scores real[], scored_by text,
                                  embedding_model text, rerank_model text)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, pg_temp
    AS $$
DECLARE
    rid bigint;
BEGIN
    IF NOT _fb_setting('pg_feedback.log_retrievals')::boolean OR pg_is_in_recovery()
       OR current_setting('transaction_read_only')::boolean THEN
        RETURN NULL;
    END IF;
    IF coalesce(cardinality(note_ids), 0) > 1000 OR coalesce(cardinality(note_ids), 0) <> coalesce(cardinality(scores), 0)
       OR scored_by IS NULL OR scored_by NOT IN ('cross-encoder', 'cosine', 'decision') OR task_type IS NULL THEN
        RAISE EXCEPTION 'not a retrieval fb_retrieve could log'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Retrievals are logged by fb_retrieve itself.';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(note_ids) AS r(id)
                WHERE NOT EXISTS (SELECT 1 FROM feedback_notes n
                                   WHERE n.id = r.id AND n.status = 'active'
                                     AND n.task_type = _fb_log_retrieval.task_type
                                     AND (n.tenant IS NULL OR n.tenant = ANY (_fb_my_tenants())))) THEN
        RAISE EXCEPTION 'a retrieval can log only active notes of its task_type that the acting role may retrieve'
            USING ERRCODE = 'insufficient_privilege', HINT = 'Retrievals are logged by fb_retrieve itself.';
    END IF;
    INSERT INTO feedback_retrievals (retrieved_by, query, task_type, note_ids, scores, scored_by, embedding_model,
                                     rerank_model)
    VALUES (_fb_actor(), fb_redact(query), task_type, coalesce(note_ids, '{}'), coalesce(scores, '{}'), scored_by,
            embedding_model, rerank_model)
    RETURNING id INTO rid;
    RETURN rid;
END $$;
COMMENT ON FUNCTION _fb_log_retrieval(text, text, bigint[], real[], text, text, text) IS
    'Internal: records a retrieval in feedback_retrievals (query redacted); NULL on a standby or in a read-only '
    'transaction.';

-- NULL: code inputs then take the prose path.
CREATE FUNCTION _fb_decision(p_model text) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, pg_temp
    BEGIN ATOMIC
        SELECT coalesce((SELECT d.decision FROM feedback_retrieval_settings d
                          WHERE d.task_type = '*' AND d.decision IS NOT NULL
                            AND d.decision ->> 'embedding_model' = p_model),
                        (SELECT x.d FROM (SELECT _fb_shipped_decision() AS d) x
                          WHERE x.d ->> 'embedding_model' = p_model));
    END;
COMMENT ON FUNCTION _fb_decision(text) IS
    'Internal: the decision fb_retrieve applies to code inputs searched with an embedding model (the calibrated '
    'one on the ''*'' row of feedback_retrieval_settings, else the shipped one when fitted for that model), or NULL.';

CREATE FUNCTION fb_retrieve(query text, task_type text, candidate_k integer DEFAULT 20, final_k integer DEFAULT NULL,
                            min_score real DEFAULT NULL, rerank boolean DEFAULT NULL, model text DEFAULT NULL)
    RETURNS TABLE (rank integer, id bigint, lesson text, correction text, similarity real, rerank_score real,
                   scored_by text, created_at timestamptz, retrieval_id bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    key text;
    tt text;
    q vector(384);
    s jsonb;
    use_rerank boolean;
    cand record;
    scores real[];
    picked integer[];
    rid bigint;
    segs text[] := '{}';
    vectors vector[];
    decision jsonb;
    scorer text;
BEGIN
    IF candidate_k IS NULL OR candidate_k NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'candidate_k must be between 1 and 1000, not %', candidate_k
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Over-fetch about 20 candidates for the reranker.';
    END IF;
    IF final_k NOT BETWEEN 1 AND candidate_k THEN
        RAISE EXCEPTION 'final_k must be between 1 and candidate_k (%), not %', candidate_k, final_k
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'final_k is how many notes to return at most (NULL: the calibrated max_notes).';
    END IF;
    -- Nothing is asked: no note applies (an empty question's vector would still be near some note).
    IF query IS NULL OR task_type IS NULL OR _fb_normalize(query) = '' THEN
        RETURN;
    END IF;
    -- Embedded in its own step, through the backend's query cache; first, so that the library is loaded and its
    -- settings defined before they are read. Only notes embedded by the same model are compared with it.
    key := _fb_resolve_model(model);
    -- A code input (snippet, diff, config file) is read by the learned decision, when there is one for this model:
    -- the segments it was fitted with, if any, are embedded with the input, in the same call.
    IF _fb_input_kind(query) = 'code' THEN
        decision := _fb_decision(key);
    END IF;
    IF decision IS NOT NULL THEN
        segs := _fb_segments(query, decision);
    END IF;
    vectors := fb_embed_batch(ARRAY[query] || segs, true, key);
    q := vectors[1];
    IF model IS NOT NULL AND _fb_slot_of(key) IS NULL THEN
        RAISE EXCEPTION 'no note is embedded with model "%"', model
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('CALL fb_reembed(%L) (superuser) embeds the notes with it first; SELECT * FROM '
                                'feedback_embedding_slots shows which models hold vectors.', model);
    END IF;
    tt := _fb_task_type(fb_retrieve.task_type);
    s := _fb_settings(tt, key);
    use_rerank := decision IS NULL AND coalesce(rerank, (s ->> 'rerank')::boolean) AND fb_rerank_model() <> '';
    scorer := CASE WHEN decision IS NOT NULL THEN 'decision' WHEN use_rerank THEN 'cross-encoder' ELSE 'cosine' END;
    IF decision IS NOT NULL THEN
        SELECT array_agg(c.id ORDER BY c.n) AS ids,
               array_agg(c.lesson ORDER BY c.n) AS lessons,
               array_agg(c.correction ORDER BY c.n) AS corrections,
               array_agg(c.similarity ORDER BY c.n) AS sims,
               array_agg(c.created_at ORDER BY c.n) AS created,
               array_agg(c.segment ORDER BY c.n) AS segments,
               array_agg(c.doc ORDER BY c.n) AS docs,
               array_agg(c.context ORDER BY c.n) AS contexts
          INTO cand
          FROM _fb_code_candidates(query, vectors, tt, candidate_k, key) WITH ORDINALITY AS c(id, lesson, correction,
                                                                                               similarity, created_at,
                                                                                               segment, doc, context,
                                                                                               n);
        IF cand.ids IS NOT NULL THEN
            -- The probability that each note applies; every note at or above the decision's threshold (a note with
            -- a context has its own), best first, at most its max_notes (a caller's min_score and final_k replace
            -- them).
            scores := _fb_decide(query, cand.docs, cand.contexts, cand.sims, cand.segments, cardinality(segs),
                                 decision, q::real[]);
            picked := _fb_rank_notes(
                CASE WHEN min_score IS NOT NULL THEN scores
                     ELSE ARRAY(SELECT CASE WHEN scores[i] >= CASE WHEN btrim(cand.contexts[i]) <> ''
                                                                   THEN coalesce((decision ->> 'threshold_context')::real,
                                                                                 (decision ->> 'threshold')::real)
                                                                   ELSE (decision ->> 'threshold')::real END
                                            THEN scores[i] END
                                  FROM generate_subscripts(scores, 1) i ORDER BY i) END,
                cand.created, s, 'decision', min_score, coalesce(final_k, (decision ->> 'max_notes')::integer),
                candidate_k);
        END IF;
    ELSE
        SELECT array_agg(c.id ORDER BY c.n) AS ids,
               array_agg(c.lesson ORDER BY c.n) AS lessons,
               array_agg(c.correction ORDER BY c.n) AS corrections,
               array_agg(c.lesson || ' ' || c.correction ORDER BY c.n) AS passages,
               array_agg(c.similarity ORDER BY c.n) AS sims,
               array_agg(c.created_at ORDER BY c.n) AS created
          INTO cand
          FROM _fb_first_stage(query, q, tt, candidate_k, key) WITH ORDINALITY AS c(id, lesson, correction, similarity,
                                                                                      created_at, fused, source, n);
        IF cand.ids IS NOT NULL THEN
            -- A caller's min_score is a ranking mode: notes at or above it in score order, up to final_k, with no
            -- relative cut and, when reranking, every candidate scored.
            IF use_rerank THEN
                -- The cross-encoder reads lesson and correction together, and only the candidates the first stage
                -- cannot settle (pg_feedback.selective_rerank); the others are not returned.
                scores := _fb_rerank_selective(query, cand.passages, cand.sims,
                                               CASE WHEN min_score IS NULL THEN s END);
            ELSE
                scores := cand.sims;
            END IF;
            picked := _fb_rank_notes(scores, cand.created, s, scorer, min_score, final_k, candidate_k);
        END IF;
    END IF;
    IF _fb_setting('pg_feedback.log_retrievals')::boolean THEN
        rid := _fb_log_retrieval(query, tt, ARRAY(SELECT cand.ids[i] FROM unnest(picked) AS i),
                                 ARRAY(SELECT scores[i] FROM unnest(picked) AS i), scorer, key,
                                 CASE WHEN use_rerank THEN fb_rerank_model() END);
    END IF;

    RETURN QUERY
    SELECT p.n::integer, cand.ids[p.i], cand.lessons[p.i], cand.corrections[p.i], cand.sims[p.i],
           CASE WHEN scorer <> 'cosine' THEN scores[p.i] END, scorer,
           cand.created[p.i], rid
      FROM unnest(picked) WITH ORDINALITY AS p(i, n)
     ORDER BY p.n;
END $$;

COMMENT ON FUNCTION fb_retrieve(text, text, integer, integer, real, boolean, text) IS
    'The notes that apply to a question or to code under review, best first, or none. A code input (a snippet, a '
    'diff, a config file: _fb_input_kind) is read by the learned decision (_fb_decision: fb_calibrate''s, else the '
    'shipped one): embedded whole, and in the segments the decision was fitted with if any (a diff''s post-image, '
    'windows of lines), in one call, each candidate scored by the probability that it applies (cosines of the '
    'input and of its best segment, words of the '
    'note and of its context in the code, rank and gaps; scored_by ''decision'', rerank_score the probability), every note at or above '
    'the decision''s threshold (threshold_context for a note with a context) returned, at most its max_notes. A question: embeds the query (cached per backend), takes the '
    'candidate_k nearest active notes of the task_type (fused with full-text matches when pg_feedback.hybrid is '
    'on), reranks the candidates the first stage cannot settle with the cross-encoder (unless rerank => false, '
    'pg_feedback.rerank = off, no pg_feedback.rerank_model, or the task_type''s calibration found that reranking '
    'does not pay off), keeps those scoring at least min_score (default: the calibrated floor) and within the '
    'relative cut of the best (none when min_score is given: a ranking mode, every candidate reranked), and returns '
    'at most final_k (default: the calibrated max_notes); between notes within the '
    'near-tie margin of the score that ranked them, the newer first. Settings: feedback_retrieval_settings, then '
    'pg_feedback.*. scored_by says which score ranked; retrieval_id is the feedback_retrievals row when '
    'pg_feedback.log_retrievals is on (for fb_judge). model => a model held in the standby slot (fb_reembed) '
    'searches its vectors instead, to try it before fb_switch_model.';

CREATE FUNCTION fb_find_duplicate(task_type text, lesson text)
    RETURNS TABLE (id bigint, lesson text, similarity real, would_merge boolean)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT c.id, c.lesson, (1 - c.distance)::real,
               1 - c.distance >= _fb_compare_bound()
                   AND _fb_setting('pg_feedback.dup_threshold')::double precision < 1
                   AND _fb_compare_lessons(c.lesson, fb_find_duplicate.lesson, _fb_task_type(fb_find_duplicate.task_type),
                                           1 - c.distance)->>'verdict' = 'duplicate'
          FROM _fb_candidates(fb_embed(fb_document_text(fb_find_duplicate.task_type, fb_find_duplicate.lesson)),
                              _fb_task_type(fb_find_duplicate.task_type), 1) c
         WHERE _fb_normalize(fb_find_duplicate.lesson) <> '';
    END;

COMMENT ON FUNCTION fb_find_duplicate(text, text) IS
    'The active note of the task_type nearest to a lesson (active model), its cosine similarity, and whether ingesting the lesson '
    'would merge into it (near enough, and fb_compare_notes calls it a duplicate). No row for a NULL or blank lesson.';

CREATE FUNCTION fb_build_prompt(query text, task_type text,
                                base_instructions text DEFAULT
                                    'You are a careful code reviewer. Apply the lessons from prior reviewer '
                                    'corrections below where they are relevant to the task.',
                                max_context_tokens integer DEFAULT 800)
    RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER
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
COMMENT ON FUNCTION _fb_rank_notes(real[], timestamptz[], jsonb, text, real, integer, integer) IS
    'Internal: positions of the notes fb_retrieve returns, in rank order, cut as the settings (_fb_settings) say '
    'for the scorer that ranked (floor and relative cut, or a caller''s min_score; best first, newer first within '
    'the near-tie margin; at most final_k, else the settings'' most notes, never more than candidate_k).';
COMMENT ON FUNCTION _fb_rerank_selective(text, text[], real[], jsonb) IS
    'Internal: cross-encoder scores of the candidates the settings'' selective reranking picks (in stages, through '
    'the backend''s score cache), NULL for the others; NULL settings score all.';
COMMENT ON FUNCTION _fb_retrieval_gucs() IS
    'Internal: the pg_feedback.* retrieval settings'' values under the keys of feedback_retrieval_settings '
    '(rerank_enabled: pg_feedback.rerank), what _fb_settings merges calibrated rows over.';
COMMENT ON FUNCTION _fb_build_prompt(text, text[], text[], integer) IS
    'Internal: assembles fb_build_prompt''s text from ranked lessons and corrections.';
