-- pg_feedback 0.8.0 -> 0.9.0: the retrieval settings as one value (issue 21). _fb_settings returns one jsonb
-- (pg_feedback.* settings, then the '*' row, then the task_type's row of feedback_retrieval_settings) that
-- _fb_rank_notes and _fb_rerank_selective receive whole and turn into the core's cut and selective-reranking
-- policy; the "no bound" values are read in one place. fb_retrieve passes it on. Retrieval is unchanged: the same
-- settings, merged the same way, give the same notes. No table changes.
\echo Use "ALTER EXTENSION pg_feedback UPDATE TO '0.9.0'" to load this file. \quit

DROP FUNCTION _fb_rank_notes(real[], timestamptz[], real, real, real, integer);
DROP FUNCTION _fb_rerank_selective(text, text[], real[], boolean, integer, real, real, integer, real, real);
DROP FUNCTION _fb_settings(text, text);

-- pg_feedback::retrieve::_fb_retrieval_gucs
CREATE  FUNCTION "_fb_retrieval_gucs"() RETURNS jsonb /* pgrx :: JsonB */
STRICT STABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_retrieval_gucs_wrapper';

-- pg_feedback::retrieve::_fb_rank_notes
CREATE  FUNCTION "_fb_rank_notes"(
	"scores" real[], /* Vec < Option < f32 > > */
	"created_at" timestamp with time zone[], /* Vec < Option < TimestampWithTimeZone > > */
	"settings" jsonb, /* Option < pgrx :: JsonB > */
	"scorer" TEXT, /* & str */
	"min_score" real, /* Option < f32 > */
	"final_k" INT, /* Option < i32 > */
	"candidate_k" INT /* i32 */
) RETURNS INT[] /* Vec < i32 > */
IMMUTABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_rank_notes_wrapper';

-- pg_feedback::rerank::_fb_rerank_selective
CREATE  FUNCTION "_fb_rerank_selective"(
	"query" TEXT, /* Option < & str > */
	"passages" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"cosines" real[], /* :: std :: option :: Option < Vec < Option < f32 > > > */
	"settings" jsonb DEFAULT NULL /* Option < pgrx :: JsonB > */
) RETURNS real[] /* :: std :: option :: Option < Vec < Option < f32 > > > */
STABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_rerank_selective_wrapper';

CREATE FUNCTION _fb_settings_metadata() RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, pg_temp
    RETURN ARRAY['task_type', 'embedding_model', 'rerank_model', 'calibrated_at', 'calibrated_by', 'calibration',
                 'decision'];
COMMENT ON FUNCTION _fb_settings_metadata() IS
    'Internal: the columns of feedback_retrieval_settings that say where a row comes from, not how to retrieve.';

-- The settings fb_retrieve applies for a task_type and embedding model, as one value (one jsonb that
-- _fb_rank_notes and _fb_rerank_selective read whole, feedback_core::rank::settings): the pg_feedback.* settings
-- (_fb_retrieval_gucs), then the '*' row, then the task_type's row, each column only where it is not NULL. A row
-- calibrated with another embedding model or cross-encoder does not apply: its floors and bounds are in that
-- model's scale. pg_feedback.rerank = off turns reranking off whatever a row says.
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

CREATE OR REPLACE FUNCTION fb_retrieve(query text, task_type text, candidate_k integer DEFAULT 20, final_k integer DEFAULT NULL,
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
    -- its segments are embedded with it, in the same call.
    IF _fb_input_kind(query) = 'code' THEN
        decision := _fb_decision(key);
    END IF;
    IF decision IS NOT NULL THEN
        segs := _fb_segments(query);
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
                                 decision);
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

REVOKE ALL ON FUNCTION _fb_retrieval_gucs(), _fb_rank_notes(real[], timestamptz[], jsonb, text, real, integer, integer),
    _fb_rerank_selective(text, text[], real[], jsonb), _fb_settings_metadata(), _fb_settings(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION _fb_settings(text, text), _fb_retrieval_gucs(), _fb_settings_metadata() TO feedback_reviewer;
