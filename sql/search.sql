-- pg_feedback: candidate search, the first stage of retrieval and of the near-duplicate check. Only notes the acting
-- role may see and only vectors of one model are compared: exact below pg_feedback.exact_scan_limit, else the slot's
-- HNSW index (iterative scan); full-text candidates for the hybrid first stage; the candidates of a code input.

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

CREATE FUNCTION _fb_candidate_filter(vec text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, pg_temp
    RETURN format('f.status = ''active'' AND f.superseded_by IS NULL AND f.%I = $3 AND f.%I IS NOT NULL '
                  'AND CASE WHEN $4 THEN (f.tenant = $5 OR (f.tenant IS NULL AND $5 IS NULL)) '
                  'ELSE f.tenant IS NULL OR f.tenant = ANY ($6) END', vec || '_model', vec);
COMMENT ON FUNCTION _fb_candidate_filter(text) IS
    'Internal: the condition every candidate search applies (active and not superseded by a live revision, '
    'embedded by the model in that slot, a '
    'tenant the acting role may see), for EXECUTE with parameters $3 model key, $4 scoped, $5 tenant, $6 tenants.';

-- Exact up to pg_feedback.exact_scan_limit notes: perfect recall, cheap for small sets. The HNSW path uses
-- pgvector's iterative scan so that a selective filter (task_type, tenant) still yields k candidates. scoped is for
-- near-duplicate merging. SECURITY DEFINER: readers have no right on feedback_notes, and a view over it could not
-- use the HNSW index for ordering (a security-barrier view is never flattened). The slot's column names come from
-- a fixed list, so the dynamic SQL takes no caller text.
CREATE FUNCTION _fb_candidates(q vector(384), p_task_type text, k integer, mode text DEFAULT 'auto',
                               p_tenant text DEFAULT NULL, scoped boolean DEFAULT false, model text DEFAULT NULL)
    RETURNS TABLE (id bigint, distance double precision, lesson text, correction text, created_at timestamptz)
    LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    SET hnsw.iterative_scan = 'relaxed_order'
    SET hnsw.ef_search = 400
    AS $$
DECLARE
    exact_limit integer := _fb_setting('pg_feedback.exact_scan_limit')::integer;
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
           INTO n USING q, p_task_type, key, scoped, p_tenant, tenants, exact_limit::bigint + 1;
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
COMMENT ON FUNCTION _fb_candidates(vector, text, integer, text, text, boolean, text) IS
    'Internal: the k nearest active notes of a task_type to a vector among those the acting role may see (shared '
    'and its tenants''), with lesson, correction and created_at, comparing only vectors of one model (default: the '
    'active one). mode auto: exact for small sets, HNSW iterative scan otherwise (see pg_feedback.exact_scan_limit); '
    'exact or ann force one path (fb_eval_ann compares them). scoped: only notes of exactly p_tenant.';

-- Not plainto_tsquery as is: it joins the lexemes with AND, which natural-language questions rarely satisfy.
CREATE FUNCTION _fb_search_terms(query text) RETURNS tsquery
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    SET search_path = pg_catalog, @extschema@, pg_temp
    RETURN nullif(replace(plainto_tsquery('pg_catalog.english'::regconfig, query)::text, ' & ', ' | '), '')::tsquery;
COMMENT ON FUNCTION _fb_search_terms(text) IS
    'Internal: the lexemes of a question OR-ed into a tsquery (NULL if none), for full-text candidates.';

-- SECURITY DEFINER as _fb_candidates.
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

CREATE FUNCTION _fb_first_stage(query text, q vector(384), p_task_type text, candidate_k integer, model text)
    RETURNS TABLE (id bigint, lesson text, correction text, similarity real, created_at timestamptz,
                   fused double precision, source text)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        WITH settings AS (
            SELECT _fb_setting('pg_feedback.hybrid')::boolean AS hybrid,
                   _fb_setting('pg_feedback.hybrid_candidates')::integer AS lexical_k,
                   _fb_setting('pg_feedback.rrf_k')::integer AS rrf_k
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

-- Dense only: the full-text stage ORs every lexeme of a 25-line input (100-190 ms at 100,000 notes) and the
-- decision reads the candidates' words itself.
CREATE FUNCTION _fb_code_candidates(query text, vectors vector[], p_task_type text, candidate_k integer, model text)
    RETURNS TABLE (id bigint, lesson text, correction text, similarity real, created_at timestamptz,
                   segment real, doc text, context text)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT f.id, f.lesson, f.correction, f.similarity, f.created_at,
               (SELECT max(1 - (_fb_vector(note, _fb_slot_of(model)) <=> v))::real FROM unnest(vectors) v),
               note.lesson || ' ' || note.correction || ' ' || note.wrong_answer, note.context
          FROM (SELECT c.id, c.lesson, c.correction, (1 - c.distance)::real AS similarity, c.created_at,
                       row_number() OVER (ORDER BY c.distance, c.id) AS pos
                  FROM _fb_candidates(vectors[1], p_task_type, candidate_k, model => model) c) f
          JOIN feedback_notes note ON note.id = f.id
         ORDER BY f.pos;
    END;
COMMENT ON FUNCTION _fb_code_candidates(text, vector[], text, integer, text) IS
    'Internal: a code input''s candidate_k nearest notes (vectors[1]: the whole input; dense only), best first, with the best '
    'cosine of any of its vectors, the note''s lesson, correction and wrong answer, and its context (what '
    '_fb_decide reads).';
