-- pg_feedback 0.3.0 -> 0.4.0: retrieval that injects only what helps. Graded golden judgments with a tune/test
-- split, precision-aware metrics and fb_calibrate, selective reranking, full-text candidates fused with the
-- dense ones, recency judged on the score that ranked, and an opt-in retrieval log with fb_judge.
-- Every stored value is kept: feedback_notes gains a generated full-text column (computed for every row, so
-- the table is rewritten once), feedback_golden gains split (each existing question gets its fixed split from
-- its text) and source, fb_eval_runs gains the new metrics' columns.
\echo Use "ALTER EXTENSION pg_feedback UPDATE TO '0.4.0'" to load this file. \quit

-- Full-text candidates.
ALTER TABLE feedback_notes ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
    to_tsvector('pg_catalog.english'::regconfig, lesson || ' ' || correction)) STORED;
CREATE INDEX feedback_notes_search_idx ON feedback_notes USING gin (search_vector);
COMMENT ON COLUMN feedback_notes.search_vector IS
    'Full-text lexemes of lesson and correction (English), generated; the second candidate source of fb_retrieve '
    'when pg_feedback.hybrid is on.';

-- Candidate search: the slot and the filter shared by the dense and the full-text search.
-- The vector column (slot) holding a model's vectors (default: the active model) and the model's key; NULL
-- column when no slot holds that model.
CREATE FUNCTION _fb_vector_column(model text, OUT key text, OUT vec text)
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT coalesce(_fb_vector_column.model, a.model),
               CASE CASE WHEN _fb_vector_column.model IS NULL OR _fb_vector_column.model = a.model THEN a.slot
                         ELSE (SELECT s.slot FROM feedback_embedding_slots s
                                WHERE s.model = _fb_vector_column.model AND NOT s.active) END
                    WHEN 1 THEN 'embedding' WHEN 2 THEN 'embedding_alt' END
          FROM _fb_active() a;
    END;
COMMENT ON FUNCTION _fb_vector_column(text) IS
    'Internal: the key of a model (default: the active one) and the feedback_notes column holding its vectors.';

-- Which notes a candidate search may return, as a WHERE condition over feedback_notes f with parameters
-- $3 model key, $4 scoped, $5 tenant, $6 tenants (the caller's EXECUTE passes them in those positions).
CREATE FUNCTION _fb_candidate_filter(vec text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, pg_temp
    RETURN format('f.status = ''active'' AND f.%I = $3 AND f.%I IS NOT NULL '
                  'AND CASE WHEN $4 THEN f.tenant IS NOT DISTINCT FROM $5 '
                  'ELSE f.tenant IS NULL OR f.tenant = ANY ($6) END', vec || '_model', vec);
COMMENT ON FUNCTION _fb_candidate_filter(text) IS
    'Internal: the condition every candidate search applies (active, embedded by the model in that slot, a '
    'tenant the acting role may see), for EXECUTE with parameters $3 model key, $4 scoped, $5 tenant, $6 tenants.';

CREATE OR REPLACE FUNCTION _fb_candidates(q vector(384), p_task_type text, k integer, mode text DEFAULT 'auto',
                               p_tenant text DEFAULT NULL, scoped boolean DEFAULT false, model text DEFAULT NULL)
    RETURNS TABLE (id bigint, distance double precision, lesson text, correction text, created_at timestamptz)
    LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    SET hnsw.iterative_scan = 'relaxed_order'
    SET hnsw.ef_search = 400
    AS $$
DECLARE
    exact_limit integer := current_setting('pg_feedback.exact_scan_limit')::integer;
    tenants text[] := CASE WHEN scoped THEN ARRAY[p_tenant] ELSE _fb_my_tenants() END;
    key text;
    vec text;
    filter text;
    n bigint;
BEGIN
    SELECT c.key, c.vec INTO key, vec FROM _fb_vector_column(model) c;
    IF k IS NULL OR k NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'k must be between 1 and 1000, not %', k
            USING ERRCODE = 'invalid_parameter_value', HINT = 'k is how many candidates to return, e.g. 20.';
    END IF;
    IF scoped AND NOT _fb_tenant_allowed(p_tenant) THEN
        RETURN;   -- another tenant's notes are never candidates for the acting role
    END IF;
    IF vec IS NULL OR q IS NULL THEN
        RETURN;   -- no slot holds vectors of this model
    END IF;
    filter := _fb_candidate_filter(vec);
    IF mode = 'auto' THEN
        EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM feedback_notes f WHERE f.task_type = $2 AND %s '
                       'LIMIT $7) s', filter)
           INTO n USING q, p_task_type, key, scoped, p_tenant, tenants, exact_limit + 1;
        mode := CASE WHEN n <= exact_limit THEN 'exact' ELSE 'ann' END;
    ELSIF mode NOT IN ('exact', 'ann') THEN
        RAISE EXCEPTION 'unknown candidate search mode "%"', mode
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Use auto, exact or ann.';
    END IF;
    IF mode = 'exact' THEN
        -- "+ 0" keeps the planner off the HNSW index: an exact top-k over the task_type's notes.
        RETURN QUERY EXECUTE format(
            'SELECT f.id, f.%1$I <=> $1, f.lesson, f.correction, f.created_at FROM feedback_notes f '
            'WHERE f.task_type = $2 AND %2$s ORDER BY (f.%1$I <=> $1) + 0, f.id LIMIT $7', vec, filter)
          USING q, p_task_type, key, scoped, p_tenant, tenants, k;
    ELSE
        -- "IS TRUE" keeps the planner on the HNSW index: with a plain equality it may pick the task_type btree
        -- and sort, which is the exact path. relaxed_order returns index order only approximately: re-sort.
        RETURN QUERY EXECUTE format(
            'SELECT c.id, c.distance, c.lesson, c.correction, c.created_at FROM '
            '(SELECT f.id, f.%1$I <=> $1 AS distance, f.lesson, f.correction, f.created_at FROM feedback_notes f '
            ' WHERE (f.task_type = $2) IS TRUE AND %2$s ORDER BY f.%1$I <=> $1 LIMIT $7) c '
            'ORDER BY c.distance, c.id', vec, filter)
          USING q, p_task_type, key, scoped, p_tenant, tenants, k;
    END IF;
END $$;
-- A question as full-text search terms: its English lexemes, any of which may match (plainto_tsquery joins them
-- with AND, which natural-language questions rarely satisfy). NULL when the question has no lexeme.
CREATE FUNCTION _fb_search_terms(query text) RETURNS tsquery
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    SET search_path = pg_catalog, @extschema@, pg_temp
    RETURN nullif(replace(plainto_tsquery('pg_catalog.english'::regconfig, query)::text, ' & ', ' | '), '')::tsquery;
COMMENT ON FUNCTION _fb_search_terms(text) IS
    'Internal: the lexemes of a question OR-ed into a tsquery (NULL if none), for full-text candidates.';

-- The k active notes of a task_type that best match full-text terms (ts_rank_cd over lesson + correction), with
-- their distance to q in the model's vector space, among the notes the acting role may see. SECURITY DEFINER
-- as _fb_candidates.
CREATE FUNCTION _fb_lexical_candidates(q vector(384), terms tsquery, p_task_type text, k integer,
                                       model text DEFAULT NULL)
    RETURNS TABLE (id bigint, distance double precision, lesson text, correction text, created_at timestamptz,
                   text_rank real)
    LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    key text;
    vec text;
BEGIN
    IF k IS NULL OR k NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'k must be between 1 and 1000, not %', k
            USING ERRCODE = 'invalid_parameter_value', HINT = 'k is how many candidates to return, e.g. 20.';
    END IF;
    SELECT c.key, c.vec INTO key, vec FROM _fb_vector_column(model) c;
    IF vec IS NULL OR q IS NULL OR terms IS NULL OR numnode(terms) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT f.id, f.%1$I <=> $1, f.lesson, f.correction, f.created_at, ts_rank_cd(f.search_vector, $8) AS r '
        'FROM feedback_notes f WHERE f.task_type = $2 AND f.search_vector @@ $8 AND %2$s '
        'ORDER BY r DESC, f.id LIMIT $7', vec, _fb_candidate_filter(vec))
      USING q, p_task_type, key, false, NULL::text, _fb_my_tenants(), k, terms;
END $$;
COMMENT ON FUNCTION _fb_lexical_candidates(vector, tsquery, text, integer, text) IS
    'Internal: full-text candidates for fb_retrieve (pg_feedback.hybrid): the k active notes of a task_type whose '
    'lesson + correction best match the terms (ts_rank_cd), with their distance to the query vector, among those '
    'the acting role may see.';

-- Ranking, selective reranking, evaluation and calibration (Rust).
CREATE  FUNCTION "_fb_rank_notes"(
	"scores" real[], /* Vec < Option < f32 > > */
	"created_at" timestamp with time zone[], /* Vec < Option < TimestampWithTimeZone > > */
	"floor" real, /* f32 */
	"relative_cut" real, /* Option < f32 > */
	"margin" real, /* f32 */
	"final_k" INT /* i32 */
) RETURNS INT[] /* Vec < i32 > */
IMMUTABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_rank_notes_wrapper';

CREATE  FUNCTION "_fb_rerank_selective"(
	"query" TEXT, /* Option < & str > */
	"passages" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"cosines" real[], /* :: std :: option :: Option < Vec < Option < f32 > > > */
	"selective" bool DEFAULT true, /* bool */
	"max_pairs" INT DEFAULT NULL, /* Option < i32 > */
	"min_cosine" real DEFAULT NULL, /* Option < f32 > */
	"cosine_gap" real DEFAULT NULL, /* Option < f32 > */
	"stage" INT DEFAULT NULL, /* Option < i32 > */
	"decided" real DEFAULT NULL, /* Option < f32 > */
	"decided_gap" real DEFAULT NULL /* Option < f32 > */
) RETURNS real[] /* :: std :: option :: Option < Vec < Option < f32 > > > */
STABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_rerank_selective_wrapper';

CREATE  FUNCTION "_fb_question_metrics"(
	"returned" bigint[], /* :: std :: option :: Option < Vec < Option < i64 > > > */
	"graded_ids" bigint[], /* :: std :: option :: Option < Vec < Option < i64 > > > */
	"grades" smallint[], /* :: std :: option :: Option < Vec < Option < i16 > > > */
	"k" INT /* i32 */
) RETURNS TABLE (
	"answerable" bool,  /* bool */
	"hit" bool,  /* bool */
	"reciprocal_rank" double precision,  /* f64 */
	"ndcg" double precision,  /* f64 */
	"injected" INT,  /* i32 */
	"relevant" INT  /* i32 */
)
IMMUTABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_question_metrics_wrapper';

CREATE  FUNCTION "_fb_calibrate_sweep"(
	"questions" jsonb, /* JsonB */
	"lambda" double precision, /* f64 */
	"k" INT, /* i32 */
	"per_group" bool, /* bool */
	"min_questions" INT, /* i32 */
	"tolerance" double precision, /* f64 */
	"stage" INT /* i32 */
) RETURNS jsonb /* JsonB */
IMMUTABLE STRICT PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_calibrate_sweep_wrapper';

-- fb_retrieve returns retrieval_id now: it and fb_build_prompt, which depends on it, are recreated.
DROP FUNCTION fb_build_prompt(text, text, text, integer);
DROP FUNCTION fb_retrieve(text, text, integer, integer, real, boolean, text);
DROP FUNCTION _fb_rank(real[], timestamptz[], real, boolean, integer);

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
    calibration          jsonb NOT NULL DEFAULT '{}'
);
SELECT pg_catalog.pg_extension_config_dump('feedback_retrieval_settings', '');
COMMENT ON TABLE feedback_retrieval_settings IS
    'How fb_retrieve cuts and reranks, per task_type (''*'': every task_type without its own row), as fb_calibrate '
    'chose it on golden questions: whether reranking pays off, floors, relative cuts (drop notes scoring this far '
    'below the best), most notes returned, the selective-reranking bounds and the near-tie margins, with the '
    'models and the numbers it was chosen on (calibration). A NULL column falls back to the ''*'' row, then to '
    'the pg_feedback.* setting of the same name. A row whose embedding_model is not the model searched, or whose '
    'rerank_model is not pg_feedback.rerank_model, does not apply (its floors and bounds are in another model''s '
    'scale). Delete the rows to go back to the settings.';

-- The settings fb_retrieve applies for a task_type and embedding model: its row, the '*' row, then pg_feedback.*
-- settings. A row calibrated with another embedding model or cross-encoder does not apply: its floors and bounds
-- are in that model's scale.
CREATE FUNCTION _fb_settings(p_task_type text, p_model text)
    RETURNS TABLE (rerank boolean, rerank_floor real, relative_cut real, max_notes integer, cosine_floor real,
                   cosine_relative_cut real, cosine_max_notes integer, selective boolean, rerank_max_pairs integer,
                   rerank_min_cosine real, rerank_cosine_gap real, rerank_stage integer, rerank_decided real,
                   rerank_decided_gap real, rerank_tie_margin real, cosine_tie_margin real)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, pg_temp
    BEGIN ATOMIC
        SELECT coalesce(t.rerank, d.rerank, true) AND current_setting('pg_feedback.rerank')::boolean,
               coalesce(t.rerank_floor, d.rerank_floor, current_setting('pg_feedback.rerank_floor')::real),
               nullif(coalesce(t.relative_cut, d.relative_cut, current_setting('pg_feedback.relative_cut')::real), -1),
               coalesce(t.max_notes, d.max_notes, current_setting('pg_feedback.max_notes')::integer),
               coalesce(t.cosine_floor, d.cosine_floor, current_setting('pg_feedback.cosine_floor')::real),
               nullif(coalesce(t.cosine_relative_cut, d.cosine_relative_cut,
                               current_setting('pg_feedback.cosine_relative_cut')::real), -1),
               coalesce(t.cosine_max_notes, d.cosine_max_notes, current_setting('pg_feedback.max_notes')::integer),
               current_setting('pg_feedback.selective_rerank')::boolean,
               coalesce(t.rerank_max_pairs, d.rerank_max_pairs, current_setting('pg_feedback.rerank_max_pairs')::integer),
               coalesce(t.rerank_min_cosine, d.rerank_min_cosine, current_setting('pg_feedback.rerank_min_cosine')::real),
               coalesce(t.rerank_cosine_gap, d.rerank_cosine_gap, current_setting('pg_feedback.rerank_cosine_gap')::real),
               current_setting('pg_feedback.rerank_stage')::integer,
               coalesce(t.rerank_decided, d.rerank_decided, current_setting('pg_feedback.rerank_decided')::real),
               coalesce(t.rerank_decided_gap, d.rerank_decided_gap,
                        current_setting('pg_feedback.rerank_decided_gap')::real),
               coalesce(t.rerank_tie_margin, d.rerank_tie_margin, current_setting('pg_feedback.rerank_tie_margin')::real),
               coalesce(t.cosine_tie_margin, d.cosine_tie_margin, current_setting('pg_feedback.tie_margin')::real)
          FROM (VALUES (1)) AS one (x)
          LEFT JOIN feedback_retrieval_settings t
                 ON t.task_type = p_task_type AND (t.embedding_model IS NULL OR t.embedding_model = p_model)
                AND (t.rerank_model IS NULL OR t.rerank_model = fb_rerank_model())
          LEFT JOIN feedback_retrieval_settings d
                 ON d.task_type = '*' AND (d.embedding_model IS NULL OR d.embedding_model = p_model)
                AND (d.rerank_model IS NULL OR d.rerank_model = fb_rerank_model());
    END;
COMMENT ON FUNCTION _fb_settings(text, text) IS
    'Internal: the retrieval settings in force for a task_type and embedding model key (feedback_retrieval_settings '
    'row, ''*'' row, each only if calibrated with that embedding model and the configured cross-encoder or with '
    'none named, then pg_feedback.* settings; '
    'pg_feedback.rerank = off turns reranking off everywhere).';

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

-- Records one retrieval; NULL when the log is off or cannot be written here (standby, read-only transaction).
-- SECURITY DEFINER: readers retrieve, only the extension writes the log. Readers can call it directly, so it
-- accepts only what fb_retrieve could have returned to the acting role: active notes of that task_type it may
-- see, at most 1000 of them, one score each, a known scorer.
CREATE FUNCTION _fb_log_retrieval(query text, task_type text, note_ids bigint[], scores real[], scored_by text,
                                  embedding_model text, rerank_model text)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, pg_temp
    AS $$
DECLARE
    rid bigint;
BEGIN
    IF NOT current_setting('pg_feedback.log_retrievals')::boolean OR pg_is_in_recovery()
       OR current_setting('transaction_read_only')::boolean THEN
        RETURN NULL;
    END IF;
    IF coalesce(cardinality(note_ids), 0) > 1000 OR coalesce(cardinality(note_ids), 0) <> coalesce(cardinality(scores), 0)
       OR scored_by IS NULL OR scored_by NOT IN ('cross-encoder', 'cosine') OR task_type IS NULL THEN
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

-- The first stage: the candidate_k nearest notes, fused by reciprocal rank with the best full-text matches when
-- pg_feedback.hybrid is on; best first, with their cosine similarity.
CREATE FUNCTION _fb_first_stage(query text, q vector(384), p_task_type text, candidate_k integer, model text)
    RETURNS TABLE (id bigint, lesson text, correction text, similarity real, created_at timestamptz,
                   fused double precision, source text)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        WITH settings AS (
            SELECT current_setting('pg_feedback.hybrid')::boolean AS hybrid,
                   current_setting('pg_feedback.hybrid_candidates')::integer AS lexical_k,
                   current_setting('pg_feedback.rrf_k')::integer AS rrf_k
        ), dense AS (
            SELECT c.id, c.lesson, c.correction, c.distance, c.created_at,
                   row_number() OVER (ORDER BY c.distance, c.id) AS r
              FROM _fb_candidates(q, p_task_type, candidate_k, model => model) c
        ), lexical AS (
            SELECT c.id, c.lesson, c.correction, c.distance, c.created_at,
                   row_number() OVER (ORDER BY c.text_rank DESC, c.id) AS r
              FROM settings s
             CROSS JOIN LATERAL _fb_lexical_candidates(q, _fb_search_terms(query), p_task_type, s.lexical_k,
                                                       model) c
             WHERE s.hybrid
        )
        SELECT coalesce(d.id, l.id), coalesce(d.lesson, l.lesson), coalesce(d.correction, l.correction),
               (1 - coalesce(d.distance, l.distance))::real, coalesce(d.created_at, l.created_at),
               coalesce(1.0 / (s.rrf_k + d.r), 0) + coalesce(1.0 / (s.rrf_k + l.r), 0) AS fused,
               CASE WHEN d.id IS NULL THEN 'text' WHEN l.id IS NULL THEN 'dense' ELSE 'both' END
          FROM dense d
          FULL JOIN lexical l ON l.id = d.id
         CROSS JOIN settings s
         ORDER BY fused DESC, coalesce(d.distance, l.distance), coalesce(d.id, l.id)
         LIMIT candidate_k;
    END;
COMMENT ON FUNCTION _fb_first_stage(text, vector, text, integer, text) IS
    'Internal: fb_retrieve''s candidates, best first: the candidate_k nearest notes (_fb_candidates), and with '
    'pg_feedback.hybrid the pg_feedback.hybrid_candidates best full-text matches, fused by reciprocal rank '
    '(1 / (pg_feedback.rrf_k + rank) summed over both lists); source says which list found each.';

CREATE FUNCTION fb_retrieve(query text, task_type text, candidate_k integer DEFAULT 20, final_k integer DEFAULT NULL,
                            min_score real DEFAULT NULL, rerank boolean DEFAULT NULL, model text DEFAULT NULL)
    RETURNS TABLE (rank integer, id bigint, lesson text, correction text, similarity real, rerank_score real,
                   scored_by text, created_at timestamptz, retrieval_id bigint)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    key text;
    tt text;
    q vector(384);
    s record;
    use_rerank boolean;
    cand record;
    scores real[];
    picked integer[];
    rid bigint;
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
    IF query IS NULL OR task_type IS NULL THEN
        RETURN;
    END IF;
    -- Embedded in its own step, through the backend's query cache; first, so that the library is loaded and its
    -- settings defined before they are read. Only notes embedded by the same model are compared with it.
    key := _fb_resolve_model(model);
    q := (fb_embed_batch(ARRAY[query], true, key))[1];
    tt := _fb_task_type(fb_retrieve.task_type);
    SELECT * INTO s FROM _fb_settings(tt, key);
    use_rerank := coalesce(rerank, s.rerank) AND fb_rerank_model() <> '';
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
        IF use_rerank THEN
            -- The cross-encoder reads lesson and correction together, and only the candidates the first stage
            -- cannot settle (pg_feedback.selective_rerank); the others are not returned.
            scores := _fb_rerank_selective(query, cand.passages, cand.sims, s.selective, s.rerank_max_pairs,
                                           s.rerank_min_cosine, s.rerank_cosine_gap, s.rerank_stage, s.rerank_decided,
                                           s.rerank_decided_gap);
            picked := _fb_rank_notes(scores, cand.created, coalesce(min_score, s.rerank_floor), s.relative_cut,
                                     s.rerank_tie_margin, least(coalesce(final_k, s.max_notes), candidate_k));
        ELSE
            scores := cand.sims;
            picked := _fb_rank_notes(scores, cand.created, coalesce(min_score, s.cosine_floor), s.cosine_relative_cut,
                                     s.cosine_tie_margin, least(coalesce(final_k, s.cosine_max_notes), candidate_k));
        END IF;
    END IF;
    IF current_setting('pg_feedback.log_retrievals')::boolean THEN
        rid := _fb_log_retrieval(query, tt, ARRAY(SELECT cand.ids[i] FROM unnest(picked) AS i),
                                 ARRAY(SELECT scores[i] FROM unnest(picked) AS i),
                                 CASE WHEN use_rerank THEN 'cross-encoder' ELSE 'cosine' END, key,
                                 CASE WHEN use_rerank THEN fb_rerank_model() END);
    END IF;

    RETURN QUERY
    SELECT p.n::integer, cand.ids[p.i], cand.lessons[p.i], cand.corrections[p.i], cand.sims[p.i],
           CASE WHEN use_rerank THEN scores[p.i] END,
           CASE WHEN use_rerank THEN 'cross-encoder' ELSE 'cosine' END,
           cand.created[p.i], rid
      FROM unnest(picked) WITH ORDINALITY AS p(i, n)
     ORDER BY p.n;
END $$;

COMMENT ON FUNCTION fb_retrieve(text, text, integer, integer, real, boolean, text) IS
    'The notes that apply to a question, best first, or none. Embeds the query (cached per backend), takes the '
    'candidate_k nearest active notes of the task_type (fused with full-text matches when pg_feedback.hybrid is '
    'on), reranks the candidates the first stage cannot settle with the cross-encoder (unless rerank => false, '
    'pg_feedback.rerank = off, no pg_feedback.rerank_model, or the task_type''s calibration found that reranking '
    'does not pay off), keeps those scoring at least min_score (default: the calibrated floor) and within the '
    'relative cut of the best, and returns at most final_k (default: the calibrated max_notes); between notes within the '
    'near-tie margin of the score that ranked them, the newer first. Settings: feedback_retrieval_settings, then '
    'pg_feedback.*. scored_by says which score ranked; retrieval_id is the feedback_retrievals row when '
    'pg_feedback.log_retrievals is on (for fb_judge). model => a model held in the standby slot (fb_reembed) '
    'searches its vectors instead, to try it before fb_switch_model.';

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

COMMENT ON FUNCTION _fb_rank_notes(real[], timestamptz[], real, real, real, integer) IS
    'Internal: positions of the notes fb_retrieve returns, in rank order (floor and relative cut, best first, newer '
    'first within the near-tie margin of the score that ranked them).';
COMMENT ON FUNCTION _fb_rerank_selective(text, text[], real[], boolean, integer, real, real, integer, real, real) IS
    'Internal: cross-encoder scores of the candidates selective reranking picks (in stages, through the backend''s '
    'score cache), NULL for the others; selective => false scores all.';
COMMENT ON FUNCTION _fb_build_prompt(text, text[], text[], integer) IS
    'Internal: assembles fb_build_prompt''s text from ranked lessons and corrections.';


-- Graded golden questions with a fixed split.
ALTER TABLE feedback_golden
    ADD COLUMN split text CHECK (split IN ('tune', 'test')),
    ADD COLUMN source text NOT NULL DEFAULT 'manual' CHECK (source IN ('manual', 'judged'));
COMMENT ON TABLE feedback_golden IS
    'Golden questions for fb_eval and fb_calibrate: a query and its task_type; expected_id, the note that should '
    'come back first (grade 2), or NULL; further graded notes in feedback_golden_judgments (a question with no '
    'note of grade >= 1 expects zero rows). split: tune (fb_calibrate chooses settings on it) or test (fb_eval '
    'reports on it); when not given, fixed by the query text (_fb_split_of). source: manual, or judged (fed by '
    'fb_judge from the retrieval log). Note ids never change, so an edited note stays the judged one.';
COMMENT ON COLUMN feedback_golden.split IS
    'tune or test; NULL on insert takes _fb_split_of(query), a fixed half of all texts.';

-- A fixed, documented half of all texts: tune when the first byte of md5(query) is even, else test.
CREATE FUNCTION _fb_split_of(query text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    SET search_path = pg_catalog, pg_temp
    RETURN CASE WHEN get_byte(decode(md5(query), 'hex'), 0) % 2 = 0 THEN 'tune' ELSE 'test' END;
COMMENT ON FUNCTION _fb_split_of(text) IS
    'The split of a golden question given none: tune when the first byte of md5(query) is even, else test.';

CREATE FUNCTION _fb_golden_split() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, pg_temp
    AS $$
BEGIN
    NEW.split := coalesce(NEW.split, _fb_split_of(NEW.query));
    RETURN NEW;
END $$;
COMMENT ON FUNCTION _fb_golden_split() IS 'Internal: gives a golden question without a split its fixed one.';
CREATE TRIGGER feedback_golden_split BEFORE INSERT OR UPDATE OF split, query ON feedback_golden
    FOR EACH ROW EXECUTE FUNCTION _fb_golden_split();
-- One judged question per (query, task_type), also when reviewers judge at the same moment.
CREATE UNIQUE INDEX feedback_golden_judged_idx ON feedback_golden (query, task_type) WHERE source = 'judged';

UPDATE feedback_golden SET split = _fb_split_of(query);
ALTER TABLE feedback_golden ALTER COLUMN split SET NOT NULL;

CREATE TABLE feedback_golden_judgments (
    golden_id  bigint NOT NULL REFERENCES feedback_golden (id) ON DELETE CASCADE,
    note_id    bigint NOT NULL REFERENCES feedback_notes (id),
    grade      smallint NOT NULL CHECK (grade BETWEEN 0 AND 2),
    PRIMARY KEY (golden_id, note_id)
);
CREATE INDEX feedback_golden_judgments_note_id_idx ON feedback_golden_judgments (note_id);
SELECT pg_catalog.pg_extension_config_dump('feedback_golden_judgments', '');
COMMENT ON TABLE feedback_golden_judgments IS
    'Graded judgments of golden questions: 2 = the lesson for it, 1 = helpful, 0 = not relevant (injecting it '
    'misleads; also what an unjudged note counts as). A question''s expected_id counts as grade 2.';

-- Every judged (question, note, grade): feedback_golden_judgments and expected_id (grade 2), the higher wins.
CREATE FUNCTION _fb_golden_grades(p_split text DEFAULT NULL)
    RETURNS TABLE (golden_id bigint, note_ids bigint[], grades smallint[])
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, pg_temp
    BEGIN ATOMIC
        SELECT x.golden_id, array_agg(x.note_id ORDER BY x.note_id), array_agg(x.grade ORDER BY x.note_id)
          FROM (SELECT j.golden_id, j.note_id, max(j.grade)::smallint AS grade
                  FROM (SELECT g.id AS golden_id, g.expected_id AS note_id, 2::smallint AS grade
                          FROM feedback_golden g WHERE g.expected_id IS NOT NULL
                        UNION ALL
                        SELECT gj.golden_id, gj.note_id, gj.grade FROM feedback_golden_judgments gj) j
                  JOIN feedback_golden g ON g.id = j.golden_id
                 WHERE p_split IS NULL OR g.split = p_split
                 GROUP BY j.golden_id, j.note_id) x
         GROUP BY x.golden_id;
    END;

-- The golden questions fb_eval and fb_calibrate score: every manual one, and a judged one once some note was
-- judged helpful for it (a judged question only knows the notes that were judged: "misleading" alone does not
-- make it a question no note answers).
CREATE FUNCTION _fb_golden_questions(p_split text DEFAULT NULL)
    RETURNS SETOF feedback_golden
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, pg_temp
    BEGIN ATOMIC
        SELECT g.* FROM feedback_golden g
         WHERE (p_split IS NULL OR g.split = p_split)
           AND (g.source = 'manual'
                OR EXISTS (SELECT 1 FROM feedback_golden_judgments j WHERE j.golden_id = g.id AND j.grade >= 1));
    END;
COMMENT ON FUNCTION _fb_golden_questions(text) IS
    'Internal: the golden questions evaluated (of a split, or all): manual ones, and judged ones with a note judged '
    'helpful.';
COMMENT ON FUNCTION _fb_golden_grades(text) IS
    'Internal: each golden question''s judged notes and grades (expected_id counts as grade 2), of one split or all.';

ALTER TABLE fb_eval_runs
    ADD COLUMN split text,
    ADD COLUMN "precision" real,
    ADD COLUMN misled_share real,
    ADD COLUMN mean_injected real;
COMMENT ON TABLE fb_eval_runs IS
    'One row per fb_eval run: when, which models and pg_feedback settings, which split (NULL: all questions), the '
    'overall numbers and the per-task_type rows. fb_eval_history compares each run with the previous one.';

DROP FUNCTION fb_eval(integer, boolean, text);
CREATE FUNCTION fb_eval(k integer DEFAULT 3, record boolean DEFAULT true, model text DEFAULT NULL,
                        split text DEFAULT NULL)
    RETURNS TABLE (task_type text, questions integer, answerable integer, recall_at_k real, mrr real,
                   ndcg_at_k real, no_answer integer, no_answer_correct real, "precision" real, misled_share real,
                   mean_injected real, embedding_model text, scored_by text)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    SET pg_feedback.log_retrievals = off
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
    IF split IS NOT NULL AND split NOT IN ('tune', 'test') THEN
        RAISE EXCEPTION 'unknown split "%"', split
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Use tune, test, or NULL for every golden question.';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM _fb_golden_questions(fb_eval.split)) THEN
        RAISE EXCEPTION 'feedback_golden has no % questions', coalesce(split, 'golden')
            USING ERRCODE = 'no_data_found',
                  HINT = 'Insert golden questions: (query, task_type, expected_id), expected_id NULL when no note '
                         'should come back; grade further notes in feedback_golden_judgments.';
    END IF;

    WITH answers AS MATERIALIZED (   -- each question is retrieved once
        SELECT g.id, g.task_type,
               (SELECT array_agg(r.id ORDER BY r.rank)
                  FROM fb_retrieve(g.query, g.task_type, greatest(20, k), model => key) r) AS got
          FROM _fb_golden_questions(fb_eval.split) g
    ), scored AS (
        SELECT _fb_task_type(a.task_type) AS task_type, m.*
          FROM answers a
          LEFT JOIN _fb_golden_grades(fb_eval.split) gr ON gr.golden_id = a.id
         CROSS JOIN LATERAL _fb_question_metrics(a.got, gr.note_ids, gr.grades, k) m
    ), rows AS (
        SELECT coalesce(s.task_type, '(all)') AS task_type,
               count(*)::integer AS questions,
               count(*) FILTER (WHERE s.answerable)::integer AS answerable,
               (avg(s.hit::integer) FILTER (WHERE s.answerable))::real AS recall_at_k,
               (avg(s.reciprocal_rank) FILTER (WHERE s.answerable))::real AS mrr,
               (avg(s.ndcg) FILTER (WHERE s.answerable))::real AS ndcg_at_k,
               count(*) FILTER (WHERE NOT s.answerable)::integer AS no_answer,
               (avg((s.injected = 0)::integer) FILTER (WHERE NOT s.answerable))::real AS no_answer_correct,
               (sum(s.relevant)::double precision / nullif(sum(s.injected), 0))::real AS "precision",
               (avg((s.relevant < s.injected)::integer) FILTER (WHERE s.answerable))::real AS misled_share,
               (avg(s.injected) FILTER (WHERE s.answerable))::real AS mean_injected,
               grouping(s.task_type) AS overall
          FROM scored s
         GROUP BY GROUPING SETS ((s.task_type), ())
    )
    SELECT jsonb_agg(to_jsonb(r) - 'overall' ORDER BY r.overall, r.task_type) INTO result FROM rows r;

    IF record THEN
        INSERT INTO fb_eval_runs (k, embedding_model, scored_by, settings, questions, recall_at_k, mrr, ndcg_at_k,
                                  no_answer_correct, by_task_type, split, "precision", misled_share, mean_injected)
        SELECT k, key, scorer,
               (SELECT jsonb_object_agg(name, setting) FROM pg_settings WHERE name LIKE 'pg_feedback.%')
                   || jsonb_build_object('feedback_retrieval_settings',
                                         (SELECT coalesce(jsonb_agg(to_jsonb(r) - 'calibration'), '[]')
                                            FROM feedback_retrieval_settings r)),
               (o ->> 'questions')::integer, (o ->> 'recall_at_k')::real, (o ->> 'mrr')::real,
               (o ->> 'ndcg_at_k')::real, (o ->> 'no_answer_correct')::real,
               (SELECT jsonb_agg(e) FROM jsonb_array_elements(result) e WHERE e ->> 'task_type' <> '(all)'),
               fb_eval.split, (o ->> 'precision')::real, (o ->> 'misled_share')::real,
               (o ->> 'mean_injected')::real
          FROM jsonb_array_elements(result) o
         WHERE o ->> 'task_type' = '(all)';
    END IF;

    RETURN QUERY
    SELECT x.task_type, x.questions, x.answerable, x.recall_at_k, x.mrr, x.ndcg_at_k, x.no_answer,
           x.no_answer_correct, x."precision", x.misled_share, x.mean_injected, key, scorer
      FROM jsonb_to_recordset(result) AS x(task_type text, questions integer, answerable integer, recall_at_k real,
                                           mrr real, ndcg_at_k real, no_answer integer, no_answer_correct real,
                                           "precision" real, misled_share real, mean_injected real);
END $$;

COMMENT ON FUNCTION fb_eval(integer, boolean, text, text) IS
    'Scores retrieval on feedback_golden through fb_retrieve (same settings users get), on one split (tune, test) '
    'or all questions (split NULL): per task_type and overall ("(all)", last row), over questions that expect a '
    'note: recall@k (a note of the question''s top grade in the first k), MRR, graded nDCG@k, misled_share (share '
    'whose injected notes include one judged irrelevant) and mean_injected; over questions that expect none: the '
    'share that got zero rows; over all: precision (share of injected notes judged >= 1). Records the run in '
    'fb_eval_runs unless record => false. model => a model in the standby slot scores its vectors (fb_reembed) '
    'before fb_switch_model makes it the active one. The retrieval log is off while it runs.';

CREATE FUNCTION fb_calibrate(split text DEFAULT 'tune', lambda real DEFAULT 0.5, per_task_type boolean DEFAULT true,
                             min_questions integer DEFAULT 50, tolerance real DEFAULT 0,
                             apply boolean DEFAULT true)
    RETURNS TABLE (task_type text, questions integer, rerank boolean, rerank_floor real, relative_cut real,
                   max_notes integer, cosine_floor real, cosine_relative_cut real, cosine_max_notes integer,
                   recall_at_3 real, "precision" real, no_answer_correct real, utility real)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    SET pg_feedback.log_retrievals = off
    AS $$
#variable_conflict use_column
DECLARE
    key text := _fb_resolve_model(NULL);
    cross_encoder text := fb_rerank_model();
    data jsonb;
    result jsonb;
    sel jsonb;
BEGIN
    IF split IS NOT NULL AND split NOT IN ('tune', 'test') THEN
        RAISE EXCEPTION 'unknown split "%"', split
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Calibrate on tune (the default), test, or NULL (all).';
    END IF;
    IF lambda IS NULL OR lambda < 0 OR tolerance IS NULL OR tolerance < 0 OR min_questions IS NULL THEN
        RAISE EXCEPTION 'lambda, tolerance and min_questions must be given and not negative'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'lambda: cost of one irrelevant note injected, in found lessons (e.g. 0.5).';
    END IF;
    IF cross_encoder = '' THEN
        RAISE EXCEPTION 'no cross-encoder is configured'
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Set pg_feedback.rerank_model.';
    END IF;
    -- Every question's first-stage candidates with their cosine similarity and full cross-encoder score (every
    -- candidate, so that the sweep can simulate any selective policy), and its grades.
    WITH golden AS (
        SELECT g.id, g.query, _fb_task_type(g.task_type) AS task_type
          FROM _fb_golden_questions(fb_calibrate.split) g
    ), candidates AS MATERIALIZED (
        SELECT g.id, g.query, g.task_type, c.ids, c.sims, c.passages
          FROM golden g
         CROSS JOIN LATERAL (
            SELECT array_agg(f.id ORDER BY f.n) AS ids, array_agg(f.similarity ORDER BY f.n) AS sims,
                   array_agg(f.lesson || ' ' || f.correction ORDER BY f.n) AS passages
              FROM _fb_first_stage(g.query, (fb_embed_batch(ARRAY[g.query], true, key))[1], g.task_type, 20, key)
                   WITH ORDINALITY AS f(id, lesson, correction, similarity, created_at, fused, source, n)) c
    ), scored AS MATERIALIZED (   -- not inlined: each question is reranked once
        SELECT c.*, CASE WHEN c.ids IS NOT NULL THEN fb_rerank(c.query, c.passages) END AS ce
          FROM candidates c
    )
    SELECT jsonb_agg(jsonb_build_object(
               'group', s.task_type,
               'graded', coalesce((SELECT jsonb_agg(jsonb_build_array(gr.note_ids[i], gr.grades[i]))
                                     FROM generate_subscripts(gr.note_ids, 1) i), '[]'),
               'candidates', coalesce((SELECT jsonb_agg(jsonb_build_object('id', s.ids[i], 'cosine', s.sims[i],
                                                                           'score', s.ce[i]) ORDER BY i)
                                         FROM generate_subscripts(s.ids, 1) i), '[]')))
      INTO data
      FROM scored s
      LEFT JOIN _fb_golden_grades(fb_calibrate.split) gr ON gr.golden_id = s.id;
    IF data IS NULL THEN
        RAISE EXCEPTION 'feedback_golden has no % questions', coalesce(split, 'golden')
            USING ERRCODE = 'no_data_found',
                  HINT = 'Insert golden questions (split tune) and grade their notes before calibrating.';
    END IF;

    result := _fb_calibrate_sweep(data, lambda, 3, per_task_type, min_questions, tolerance,
                                  current_setting('pg_feedback.rerank_stage')::integer);
    sel := result -> 'selective' -> 'policy';

    IF apply THEN
        DELETE FROM feedback_retrieval_settings;
        INSERT INTO feedback_retrieval_settings (task_type, rerank, rerank_floor, relative_cut, max_notes,
                                                 cosine_floor, cosine_relative_cut, cosine_max_notes,
                                                 rerank_max_pairs, rerank_min_cosine, rerank_cosine_gap,
                                                 rerank_decided, rerank_decided_gap, rerank_tie_margin,
                                                 cosine_tie_margin, embedding_model, rerank_model, calibrated_by,
                                                 calibration)
        SELECT g ->> 'group', (g ->> 'rerank')::boolean,
               (g -> 'cross_encoder' ->> 'floor')::real, coalesce((g -> 'cross_encoder' ->> 'relative_cut')::real, -1),
               (g -> 'cross_encoder' ->> 'max_notes')::integer,
               (g -> 'cosine' ->> 'floor')::real, coalesce((g -> 'cosine' ->> 'relative_cut')::real, -1),
               (g -> 'cosine' ->> 'max_notes')::integer,
               -- Selective bounds and margins are chosen over all questions: on the '*' row only.
               CASE WHEN g ->> 'group' = '*' THEN least((sel ->> 'max_pairs')::numeric, 1000)::integer END,
               CASE WHEN g ->> 'group' = '*' THEN coalesce((sel ->> 'min_cosine')::real, -1) END,
               CASE WHEN g ->> 'group' = '*' THEN coalesce((sel ->> 'cosine_gap')::real, 2) END,
               CASE WHEN g ->> 'group' = '*' THEN coalesce((sel ->> 'decided')::real, 100) END,
               CASE WHEN g ->> 'group' = '*' THEN coalesce((sel ->> 'decided_gap')::real, 2) END,
               CASE WHEN g ->> 'group' = '*' THEN (result ->> 'rerank_tie_margin')::real END,
               CASE WHEN g ->> 'group' = '*' THEN (result ->> 'cosine_tie_margin')::real END,
               key, cross_encoder, _fb_actor(),
               jsonb_build_object('split', fb_calibrate.split, 'lambda', lambda, 'tolerance', tolerance,
                                  'questions', g -> 'questions', 'cross_encoder', g -> 'cross_encoder' -> 'summary',
                                  'cosine', g -> 'cosine' -> 'summary',
                                  'selective', CASE WHEN g ->> 'group' = '*' THEN result -> 'selective' END)
          FROM jsonb_array_elements(result -> 'groups') g;
    END IF;

    RETURN QUERY
    SELECT g ->> 'group', (g ->> 'questions')::integer, (g ->> 'rerank')::boolean,
           (g -> 'cross_encoder' ->> 'floor')::real, (g -> 'cross_encoder' ->> 'relative_cut')::real,
           (g -> 'cross_encoder' ->> 'max_notes')::integer,
           (g -> 'cosine' ->> 'floor')::real, (g -> 'cosine' ->> 'relative_cut')::real,
           (g -> 'cosine' ->> 'max_notes')::integer,
           (c -> 'summary' ->> 'recall')::real, (c -> 'summary' ->> 'precision')::real,
           (c -> 'summary' ->> 'no_answer_correct')::real, (c ->> 'utility')::real
      FROM jsonb_array_elements(result -> 'groups') g
     CROSS JOIN LATERAL (SELECT CASE WHEN (g ->> 'rerank')::boolean THEN g -> 'cross_encoder'
                                     ELSE g -> 'cosine' END AS c) chosen
     ORDER BY g ->> 'group' <> '*', g ->> 'group';
END $$;

COMMENT ON FUNCTION fb_calibrate(text, real, boolean, integer, real, boolean) IS
    'Chooses fb_retrieve''s settings on the golden questions of a split (default tune): scores every question''s '
    '20 first-stage candidates with the cross-encoder once, then for cross-encoder and cosine ranking picks the '
    'floor, relative cut and most notes that maximise (lessons found - lambda x irrelevant notes injected) / '
    'questions (lambda: what one misleading note costs, in found lessons; default 0.5), per task_type with at '
    'least min_questions questions and for all (''*''); reranks a task_type only where that beats cosine; picks '
    'the cheapest selective-reranking bounds (fewest pairs at the 95th percentile, then on average) whose '
    'recall@3 and precision stay within tolerance of reranking every candidate, and the near-tie margins. With '
    'apply (default) it replaces the rows of feedback_retrieval_settings. Returns the chosen cut and its numbers '
    'per row (of the scorer the row uses). Report on the other split with fb_eval(split => ''test'').';
CREATE OR REPLACE VIEW fb_eval_history AS
SELECT r.id, r.run_at, r.k, r.embedding_model, r.scored_by, r.questions, r.recall_at_k, r.mrr, r.ndcg_at_k,
       r.no_answer_correct,
       r.recall_at_k - lag(r.recall_at_k) OVER w AS recall_change,
       r.mrr - lag(r.mrr) OVER w AS mrr_change,
       r.no_answer_correct - lag(r.no_answer_correct) OVER w AS no_answer_change,
       r.split, r."precision", r.misled_share, r.mean_injected,
       r."precision" - lag(r."precision") OVER w AS precision_change
  FROM fb_eval_runs r
WINDOW w AS (PARTITION BY r.k, r.split ORDER BY r.run_at, r.id);

COMMENT ON VIEW fb_eval_history IS
    'Every fb_eval run with its overall numbers and the change from the previous run with the same k and split.';

-- Closing the loop: reviewers judge what retrieval injected; judgments feed the golden set and show which notes
-- mislead.
CREATE TABLE feedback_retrieval_judgments (
    retrieval_id  bigint NOT NULL REFERENCES feedback_retrievals (id) ON DELETE CASCADE,
    note_id       bigint NOT NULL REFERENCES feedback_notes (id),
    relevant      boolean NOT NULL,
    judged_by     text NOT NULL DEFAULT session_user,
    judged_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (retrieval_id, note_id)
);
CREATE INDEX feedback_retrieval_judgments_note_id_idx ON feedback_retrieval_judgments (note_id);
SELECT pg_catalog.pg_extension_config_dump('feedback_retrieval_judgments', '');
COMMENT ON TABLE feedback_retrieval_judgments IS
    'A reviewer''s judgment (fb_judge) of a note a logged retrieval injected: relevant (helpful) or not '
    '(misleading); the latest judgment of a (retrieval, note) wins.';

CREATE FUNCTION fb_judge(retrieval_id bigint, note_id bigint, relevant boolean)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, @extschema@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    r record;
    gid bigint;
BEGIN
    IF retrieval_id IS NULL OR note_id IS NULL OR relevant IS NULL THEN
        RAISE EXCEPTION 'retrieval_id, note_id and relevant must not be NULL'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'fb_judge(retrieval_id, note_id, true) marks a returned note helpful, false misleading.';
    END IF;
    SELECT * INTO r FROM feedback_retrievals WHERE id = fb_judge.retrieval_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no logged retrieval %', retrieval_id
            USING ERRCODE = 'no_data_found',
                  HINT = 'retrieval_id is what fb_retrieve returns while pg_feedback.log_retrievals is on.';
    END IF;
    IF NOT (fb_judge.note_id = ANY (r.note_ids)) THEN
        RAISE EXCEPTION 'note % was not returned by retrieval %', note_id, retrieval_id
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Judge the notes a retrieval injected: feedback_retrievals.note_ids.';
    END IF;
    INSERT INTO feedback_retrieval_judgments AS j (retrieval_id, note_id, relevant, judged_by)
    VALUES (fb_judge.retrieval_id, fb_judge.note_id, fb_judge.relevant, _fb_actor())
    ON CONFLICT ON CONSTRAINT feedback_retrieval_judgments_pkey
    DO UPDATE SET relevant = excluded.relevant, judged_by = excluded.judged_by, judged_at = now();

    -- The golden set grows with use: the judged query becomes a golden question (the existing one with the same
    -- query and task_type, manual or judged, so it keeps its split), the note a grade 1 (helpful) or 0
    -- (misleading) judgment of it.
    FOR i IN 1..2 LOOP
        SELECT g.id INTO gid FROM feedback_golden g
         WHERE g.query = r.query AND g.task_type = r.task_type
         ORDER BY g.source = 'judged', g.id LIMIT 1;
        EXIT WHEN gid IS NOT NULL;
        INSERT INTO feedback_golden (query, task_type, source) VALUES (r.query, r.task_type, 'judged')
        ON CONFLICT (query, task_type) WHERE source = 'judged' DO NOTHING;
    END LOOP;
    INSERT INTO feedback_golden_judgments AS gj (golden_id, note_id, grade)
    VALUES (gid, fb_judge.note_id, CASE WHEN fb_judge.relevant THEN 1 ELSE 0 END)
    ON CONFLICT ON CONSTRAINT feedback_golden_judgments_pkey DO UPDATE SET grade = excluded.grade;
    RETURN gid;
END $$;
COMMENT ON FUNCTION fb_judge(bigint, bigint, boolean) IS
    'A reviewer marks a note a logged retrieval injected as helpful (true) or misleading (false). Recorded in '
    'feedback_retrieval_judgments, and fed into the golden set: the query becomes a golden question (source '
    'judged, split fixed by its text; or the existing question with that text) with the note graded 1 or 0, so '
    'fb_eval and fb_calibrate learn from use (a judged question counts once some note was judged helpful for it). '
    'Returns the golden question''s id.';

CREATE VIEW feedback_note_quality AS
SELECT n.id AS note_id, n.task_type, n.status, n.lesson,
       coalesce(i.injected, 0) AS injected, i.last_injected_at,
       coalesce(j.judged, 0) AS judged, coalesce(j.helpful, 0) AS helpful, coalesce(j.misleading, 0) AS misleading,
       (j.misleading::double precision / nullif(j.judged, 0))::real AS misleading_share
  FROM feedback_notes n
  LEFT JOIN (SELECT x.note_id, count(*) AS injected, max(r.retrieved_at) AS last_injected_at
               FROM feedback_retrievals r CROSS JOIN LATERAL unnest(r.note_ids) AS x(note_id)
              GROUP BY x.note_id) i ON i.note_id = n.id
  LEFT JOIN (SELECT jj.note_id, count(*) AS judged, count(*) FILTER (WHERE jj.relevant) AS helpful,
                    count(*) FILTER (WHERE NOT jj.relevant) AS misleading
               FROM feedback_retrieval_judgments jj GROUP BY jj.note_id) j ON j.note_id = n.id
 WHERE i.note_id IS NOT NULL OR j.note_id IS NOT NULL;
COMMENT ON VIEW feedback_note_quality IS
    'Per note that logged retrievals injected or reviewers judged: how often it was injected (and last when), '
    'judged, judged helpful, judged misleading, and the misleading share: a poisoned or stale lesson shows here '
    '(ORDER BY misleading DESC).';

-- Privileges of the new and recreated objects (sql/security.sql).
REVOKE ALL ON FUNCTION
    _fb_vector_column(text), _fb_candidate_filter(text), _fb_search_terms(text),
    _fb_lexical_candidates(vector, tsquery, text, integer, text),
    _fb_rank_notes(real[], timestamptz[], real, real, real, integer),
    _fb_rerank_selective(text, text[], real[], boolean, integer, real, real, integer, real, real),
    _fb_question_metrics(bigint[], bigint[], smallint[], integer),
    _fb_calibrate_sweep(jsonb, double precision, integer, boolean, integer, double precision, integer),
    _fb_settings(text, text), _fb_log_retrieval(text, text, bigint[], real[], text, text, text),
    _fb_first_stage(text, vector, text, integer, text),
    fb_retrieve(text, text, integer, integer, real, boolean, text), fb_build_prompt(text, text, text, integer),
    _fb_split_of(text), _fb_golden_split(), _fb_golden_grades(text), _fb_golden_questions(text),
    fb_eval(integer, boolean, text, text), fb_calibrate(text, real, boolean, integer, real, boolean),
    fb_judge(bigint, bigint, boolean)
FROM PUBLIC;
REVOKE ALL ON feedback_retrieval_settings, feedback_retrievals, feedback_golden_judgments,
              feedback_retrieval_judgments, feedback_note_quality FROM PUBLIC;
REVOKE ALL ON SEQUENCE feedback_retrievals_id_seq FROM PUBLIC;
GRANT SELECT ON feedback_retrieval_settings TO feedback_reader;
GRANT EXECUTE ON FUNCTION
    fb_retrieve(text, text, integer, integer, real, boolean, text),
    fb_build_prompt(text, text, text, integer),
    _fb_lexical_candidates(vector, tsquery, text, integer, text), _fb_search_terms(text),
    _fb_first_stage(text, vector, text, integer, text), _fb_settings(text, text),
    _fb_rerank_selective(text, text[], real[], boolean, integer, real, real, integer, real, real),
    _fb_rank_notes(real[], timestamptz[], real, real, real, integer),
    _fb_log_retrieval(text, text, bigint[], real[], text, text, text)
TO feedback_reader;
GRANT SELECT ON feedback_retrievals, feedback_retrieval_judgments, feedback_note_quality TO feedback_reviewer;
GRANT SELECT, INSERT, UPDATE, DELETE ON feedback_golden_judgments, feedback_retrieval_settings TO feedback_reviewer;
GRANT INSERT, UPDATE ON feedback_retrieval_judgments TO feedback_reviewer;
GRANT EXECUTE ON FUNCTION
    fb_eval(integer, boolean, text, text), fb_calibrate(text, real, boolean, integer, real, boolean),
    fb_judge(bigint, bigint, boolean), _fb_golden_grades(text), _fb_golden_questions(text),
    _fb_question_metrics(bigint[], bigint[], smallint[], integer),
    _fb_calibrate_sweep(jsonb, double precision, integer, boolean, integer, double precision, integer),
    _fb_split_of(text)
TO feedback_reviewer;
