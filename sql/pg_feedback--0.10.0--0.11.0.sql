-- pg_feedback 0.10.0 -> 0.11.0: slice indexes are IVFFlat over the normalised vectors instead of HNSW.
--
-- At 1M notes an HNSW slice index of a 100,000-note task_type found 79% of the exact top 20 (ef_search 400; some
-- questions none of it: the greedy search stays in a cluster of near-duplicate lessons); IVFFlat with sqrt(notes)
-- lists and 20 probes finds 99-100% in 1-4 ms and builds about 3 times faster. Existing HNSW slice indexes are
-- left in place but no longer used (candidates take the exact or global path for those task_types) until
-- fb_maintain() replaces them; run it after this update. The full-text stage reads a task_type of at most
-- exact_scan_limit notes note by note instead of through the full-text index, which reads a common word's matches
-- in the whole table first (30 ms at 1M notes).

\echo Use "ALTER EXTENSION pg_feedback UPDATE TO '0.11.0'" to load this file. \quit

COMMENT ON TABLE feedback_slice_indexes IS
    'The slice indexes (partial IVFFlat) fb_maintain built, one per (task_type, embedding slot): the active notes '
    'of the '
    'slice when it was built, how long the build took, and the candidate recall@20 against exact search that '
    'fb_eval_ann measured right after (random notes of the slice as queries). See feedback_index_status.';

CREATE OR REPLACE FUNCTION _fb_slice_index(p_task_type text, vec text) RETURNS name
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, pg_temp
    BEGIN ATOMIC
        SELECT s.index_name
          FROM feedback_slice_indexes s
          JOIN pg_index i ON i.indexrelid = to_regclass(quote_ident(s.index_name))
          JOIN pg_class c ON c.oid = i.indexrelid
          JOIN pg_am a ON a.oid = c.relam
         WHERE s.task_type = p_task_type AND s.slot = CASE vec WHEN 'embedding' THEN 1 ELSE 2 END
           AND i.indisvalid AND i.indisready AND a.amname = 'ivfflat';
    END;
COMMENT ON FUNCTION _fb_slice_index(text, text) IS
    'Internal: the name of the valid slice index (partial IVFFlat) fb_maintain built for a task_type on a vector '
    'column, or NULL (also for an HNSW slice index of 0.10.0, which fb_maintain replaces).';

CREATE OR REPLACE FUNCTION _fb_slice_index_statement(p_task_type text, slot smallint, by_hand boolean DEFAULT false,
                                          OUT index_name name, OUT statement text)
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, pg_temp
    BEGIN ATOMIC
        SELECT n.name, format('CREATE INDEX %s%I ON %I.feedback_notes USING ivfflat '
                              '((%I.l2_normalize(%I)::%I.vector(384)) vector_cosine_ops) WITH (lists = %s) '
                              'WHERE (task_type = %L) IS TRUE AND status = ''active''',
                              CASE WHEN by_hand THEN 'CONCURRENTLY ' ELSE '' END, n.name, '@extschema@',
                              '@extschema:vector@', CASE slot WHEN 1 THEN 'embedding' WHEN 2 THEN 'embedding_alt' END,
                              '@extschema:vector@',
                              greatest(10, round(sqrt((SELECT count(*) FROM feedback_notes f
                                                        WHERE f.task_type = p_task_type AND f.status = 'active')))),
                              p_task_type)
          FROM (SELECT ('feedback_notes_slice_' || left(md5(p_task_type || '/' || slot), 16) || '_idx')::name) n(name);
    END;
COMMENT ON FUNCTION _fb_slice_index_statement(text, smallint, boolean) IS
    'Internal: the name of a task_type''s slice index on a vector slot and the CREATE INDEX statement that builds '
    'it (by_hand: CONCURRENTLY, to run outside a transaction): IVFFlat over the normalised vectors of the slice''s '
    'active notes, sqrt(notes) lists and at least 10.';

CREATE OR REPLACE FUNCTION _fb_candidates(q vector(384), p_task_type text, k integer, mode text DEFAULT 'auto',
                               p_tenant text DEFAULT NULL, scoped boolean DEFAULT false, model text DEFAULT NULL)
    RETURNS TABLE (id bigint, distance double precision, lesson text, correction text, created_at timestamptz)
    LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    SET hnsw.iterative_scan = 'relaxed_order'
    SET hnsw.ef_search = 400
    SET ivfflat.iterative_scan = 'relaxed_order'
    SET ivfflat.probes = 20
    AS $$
DECLARE
    exact_limit integer := _fb_setting('pg_feedback.exact_scan_limit')::integer;
    tenants text[] := CASE WHEN scoped THEN ARRAY[p_tenant] ELSE _fb_my_tenants() END;
    key text;
    vec text;
    filter text;
    slice name;
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
    IF mode IN ('auto', 'ann') THEN
        slice := _fb_slice_index(p_task_type, vec);
    END IF;
    IF mode = 'auto' AND slice IS NOT NULL THEN
        mode := 'ann';
    ELSIF mode = 'auto' THEN
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
        -- "IS TRUE" keeps the planner on an index: with a plain equality it may pick the task_type btree and
        -- sort, which is the exact path. A slice index's predicate is "(task_type = '...') IS TRUE AND status =
        -- 'active'", so the task_type is written as that literal for the planner to prove the predicate (a
        -- parameter cannot match it); it is the name of an existing slice, quoted. The slice index is on
        -- l2_normalize(vector), so a slice query orders by that (the same order: stored vectors are unit
        -- vectors) and no other index can serve it. relaxed_order returns index order only approximately: re-sort.
        RETURN QUERY EXECUTE format(
            'SELECT c.id, c.distance, c.lesson, c.correction, c.created_at FROM '
            '(SELECT f.id, f.%1$I <=> $1 AS distance, f.lesson, f.correction, f.created_at FROM feedback_notes f '
            ' WHERE (f.task_type = %3$s) IS TRUE AND %2$s ORDER BY %4$s <=> $1 LIMIT $7) c '
            'ORDER BY c.distance, c.id', vec, filter,
            CASE WHEN slice IS NULL THEN '$2' ELSE quote_literal(p_task_type) END,
            CASE WHEN slice IS NULL THEN format('f.%I', vec) ELSE format('l2_normalize(f.%I)::vector(384)', vec) END)
          USING q, p_task_type, key, scoped, p_tenant, tenants, k;
    END IF;
END $$;
COMMENT ON FUNCTION _fb_candidates(vector, text, integer, text, text, boolean, text) IS
    'Internal: the k nearest active notes of a task_type to a vector among those the acting role may see (shared '
    'and its tenants''), with lesson, correction and created_at, comparing only vectors of one model (default: the '
    'active one). mode auto: the task_type''s slice index (partial IVFFlat) when fb_maintain built one, else exact for small '
    'sets and the global HNSW index otherwise (see pg_feedback.exact_scan_limit); exact or ann (an index: the '
    'slice''s if there is one) force one path (fb_eval_ann compares them). scoped: only notes of exactly p_tenant.';

CREATE OR REPLACE FUNCTION _fb_lexical_candidates(q vector(384), terms tsquery, p_task_type text, k integer,
                                       model text DEFAULT NULL)
    RETURNS TABLE (id bigint, distance double precision, lesson text, correction text, created_at timestamptz,
                   text_rank real)
    LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    rank_limit integer := _fb_setting('pg_feedback.lexical_rank_limit')::integer;
    exact_limit integer := _fb_setting('pg_feedback.exact_scan_limit')::integer;
    small boolean;
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
    SELECT count(*) <= exact_limit INTO small
      FROM (SELECT 1 FROM feedback_notes f WHERE f.task_type = p_task_type AND f.status = 'active'
             LIMIT exact_limit::bigint + 1) s;
    RETURN QUERY EXECUTE format(
        'SELECT f.id, f.%1$I <=> $1, f.lesson, f.correction, f.created_at, m.r FROM '
        '(SELECT s.id, ts_rank_cd(s.search_vector, $8) AS r FROM '
        ' (SELECT f.id, f.search_vector FROM feedback_notes f '
        '   WHERE f.task_type = $2 AND %3$s AND %2$s LIMIT $9) s '
        ' ORDER BY r DESC, s.id LIMIT $7) m '
        'JOIN feedback_notes f ON f.id = m.id ORDER BY m.r DESC, m.id', vec, _fb_candidate_filter(vec),
        CASE WHEN small THEN '(f.search_vector @@ $8) IS TRUE' ELSE 'f.search_vector @@ $8' END)
      USING q, p_task_type, key, false, NULL::text, _fb_my_tenants(), k, terms, rank_limit;
END $$;
COMMENT ON FUNCTION _fb_lexical_candidates(vector, tsquery, text, integer, text) IS
    'Internal: full-text candidates for fb_retrieve (pg_feedback.hybrid): the k active notes of a task_type whose '
    'lesson + correction best match the terms (ts_rank_cd over at most pg_feedback.lexical_rank_limit matches), '
    'with their distance to the query vector, among those the acting role may see.';

CREATE OR REPLACE FUNCTION fb_maintain(p_task_type text DEFAULT NULL, measure boolean DEFAULT true)
    RETURNS TABLE (task_type text, notes bigint, action text, index_name name, build_ms double precision,
                   recall real)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    min_notes bigint := _fb_setting('pg_feedback.slice_index_min')::bigint;
    act smallint := _fb_active_slot();
    vec text := (SELECT c.vec FROM _fb_vector_column(NULL) c);
    only_type text := CASE WHEN p_task_type IS NOT NULL THEN _fb_task_type(p_task_type) END;
    r record;
    plan jsonb;
    name_ name;
    ddl text;
    t0 timestamptz;
    ms double precision;
    rec real;
    queries integer;
BEGIN
    -- One at a time: two runs would both build the same index.
    PERFORM pg_advisory_xact_lock(hashtext('pg_feedback.fb_maintain'));
    -- Slices of a slot no longer active (after fb_switch_model) are not searched: drop them.
    FOR r IN SELECT s.task_type, s.index_name FROM feedback_slice_indexes s
              WHERE s.slot <> act AND (only_type IS NULL OR s.task_type = only_type) LOOP
        EXECUTE format('DROP INDEX IF EXISTS %I', r.index_name);
        DELETE FROM feedback_slice_indexes s WHERE s.index_name = r.index_name;
        RETURN QUERY SELECT r.task_type, NULL::bigint, 'dropped'::text, r.index_name, NULL::double precision, NULL::real;
    END LOOP;
    -- Planned first, then built: CREATE INDEX refuses a table an open loop still reads.
    SELECT coalesce(jsonb_agg(x ORDER BY x.task_type), '[]') INTO plan
      FROM (SELECT coalesce(c.task_type, s.task_type) AS task_type, coalesce(c.notes, 0) AS notes, s.index_name,
                   _fb_slice_index(coalesce(c.task_type, s.task_type), vec) IS NOT NULL
                       AND coalesce(c.notes, 0) < 2 * s.notes AS usable
              FROM (SELECT n.task_type, count(*) AS notes FROM feedback_notes n
                     WHERE n.status = 'active' AND (only_type IS NULL OR n.task_type = only_type)
                     GROUP BY n.task_type) c
              FULL JOIN (SELECT * FROM feedback_slice_indexes s
                          WHERE s.slot = act AND (only_type IS NULL OR s.task_type = only_type)) s
                ON s.task_type = c.task_type) x;
    FOR r IN SELECT * FROM jsonb_to_recordset(plan) AS p(task_type text, notes bigint, index_name name, usable boolean)
    LOOP
        IF r.index_name IS NOT NULL AND r.notes < min_notes / 2 THEN
            EXECUTE format('DROP INDEX IF EXISTS %I', r.index_name);
            DELETE FROM feedback_slice_indexes s WHERE s.index_name = r.index_name;
            RETURN QUERY SELECT r.task_type, r.notes, 'dropped'::text, r.index_name, NULL::double precision,
                                NULL::real;
        ELSIF r.notes >= greatest(min_notes, 1) AND NOT coalesce(r.usable, false) THEN
            SELECT d.index_name, d.statement INTO name_, ddl FROM _fb_slice_index_statement(r.task_type, act) d;
            t0 := clock_timestamp();
            IF to_regclass(quote_ident(name_)) IS NOT NULL THEN   -- an invalid one a failed build by hand left
                EXECUTE format('DROP INDEX %I', name_);
            END IF;
            EXECUTE ddl;
            ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
            INSERT INTO feedback_slice_indexes AS s (task_type, slot, index_name, notes, build_ms)
            VALUES (r.task_type, act, name_, r.notes, ms)
            ON CONFLICT (task_type, slot) DO UPDATE
               SET index_name = excluded.index_name, notes = excluded.notes, built_at = now(),
                   build_ms = excluded.build_ms, recall = NULL, recall_queries = NULL, measured_at = NULL;
            rec := NULL;
            IF coalesce(measure, true) THEN
                SELECT e.recall, e.queries INTO rec, queries
                  FROM fb_eval_ann(20, 20, r.task_type) e WHERE e.task_type = r.task_type;
                UPDATE feedback_slice_indexes s SET recall = rec, recall_queries = queries, measured_at = now()
                 WHERE s.index_name = name_;
            END IF;
            RETURN QUERY SELECT r.task_type, r.notes, 'built'::text, name_, ms, rec;
        ELSIF r.index_name IS NOT NULL THEN
            RETURN QUERY SELECT r.task_type, r.notes, 'kept'::text, r.index_name,
                                NULL::double precision, NULL::real;
        END IF;
    END LOOP;
END $$;
COMMENT ON FUNCTION fb_maintain(text, boolean) IS
    'Builds a slice index (partial IVFFlat, sqrt(notes) lists) for every task_type (or only p_task_type) with at '
    'least pg_feedback.slice_index_min active notes, so its candidate search stays complete at any store size; '
    'rebuilds it once the slice has doubled since (its lists no longer fit) or when it is a 0.10.0 HNSW one; drops '
    'the index of a slice below half of that or of a slot no longer active. measure: run fb_eval_ann on each '
    'new index (20 of its notes as queries). One row per slice with an index: built, kept or dropped. Writes to '
    'feedback_notes wait while an index builds. Superuser or the extension''s owner; for cron: SELECT fb_maintain().';

CREATE OR REPLACE VIEW feedback_index_status AS
SELECT coalesce(c.task_type, s.task_type) AS task_type,
       coalesce(c.notes, 0) AS notes,
       CASE WHEN _fb_slice_index(coalesce(c.task_type, s.task_type), (SELECT v.vec FROM _fb_vector_column(NULL) v))
                 IS NOT NULL THEN 'slice index'
            WHEN coalesce(c.notes, 0) <= _fb_setting('pg_feedback.exact_scan_limit')::bigint THEN 'exact'
            ELSE 'global index' END AS search,
       s.index_name,
       CASE WHEN s.index_name IS NULL THEN NULL WHEN i.indexrelid IS NULL THEN 'missing'
            WHEN NOT i.indisvalid THEN 'invalid' ELSE 'valid' END AS index_state,
       pg_relation_size(i.indexrelid) AS index_bytes,
       s.notes AS notes_at_build, s.built_at, s.build_ms, s.recall, s.recall_queries, s.measured_at,
       CASE WHEN s.index_name IS NULL AND coalesce(c.notes, 0) >= _fb_setting('pg_feedback.slice_index_min')::bigint
            THEN 'fb_maintain builds one'
            WHEN s.index_name IS NOT NULL
                 AND coalesce(c.notes, 0) < _fb_setting('pg_feedback.slice_index_min')::bigint / 2
            THEN 'fb_maintain drops it'
            WHEN s.index_name IS NOT NULL
                 AND coalesce(c.notes, 0) >= greatest(_fb_setting('pg_feedback.slice_index_min')::bigint, 1)
                 AND (coalesce(c.notes, 0) >= 2 * s.notes
                      OR _fb_slice_index(s.task_type, (SELECT v.vec FROM _fb_vector_column(NULL) v)) IS NULL)
            THEN 'fb_maintain rebuilds it' END AS next_step,
       (_fb_slice_index_statement(coalesce(c.task_type, s.task_type), _fb_active_slot(), true)).statement
           AS build_statement
  FROM (SELECT n.task_type, count(*) AS notes FROM feedback_notes n WHERE n.status = 'active'
         GROUP BY n.task_type) c
  FULL JOIN (SELECT x.* FROM feedback_slice_indexes x WHERE x.slot = _fb_active_slot()) s
    ON s.task_type = c.task_type
  LEFT JOIN pg_index i ON i.indexrelid = to_regclass(quote_ident(s.index_name));
COMMENT ON VIEW feedback_index_status IS
    'One row per task_type with active notes (or a slice index): how fb_retrieve searches its candidates (slice '
    'index, exact, or the global HNSW index), its index, the index''s state and size, when fb_maintain built it '
    'and the recall fb_eval_ann measured then, what fb_maintain will do next; build_statement builds it by hand '
    'without blocking writes.';

-- Code inputs are embedded whole only by default: segments (a diff's post-image, windows of lines) cost two
-- thirds of a code input's retrieval time and gave no measurable gain on the held-out authors. A decision says how
-- many it was fitted with (max_segments; one without, fitted before 0.11.0, with 8), fb_retrieve embeds as many,
-- and fb_calibrate(code_segments => n) fits with n (default 0).
DROP FUNCTION _fb_segments(text);
-- pg_feedback::decide::_fb_segments_for
CREATE  FUNCTION "_fb_segments"(
	"query" TEXT, /* & str */
	"decision" jsonb /* JsonB */
) RETURNS TEXT[] /* Vec < String > */
IMMUTABLE STRICT PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_segments_for_wrapper';

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

DROP FUNCTION fb_calibrate(text, real, boolean, integer, real, boolean);
CREATE FUNCTION fb_calibrate(split text DEFAULT 'tune', lambda real DEFAULT 0.5, per_task_type boolean DEFAULT true,
                             min_questions integer DEFAULT 50, tolerance real DEFAULT 0,
                             apply boolean DEFAULT true, code_segments integer DEFAULT 0)
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
    code_data jsonb;
    decision jsonb;
    segmenting jsonb := jsonb_build_object('max_segments', code_segments);
    result jsonb;
    sel jsonb;
BEGIN
    IF split IS NOT NULL AND split NOT IN ('tune', 'test') THEN
        RAISE EXCEPTION 'unknown split "%"', split
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Calibrate on tune (the default), test, or NULL (all).';
    END IF;
    IF lambda IS NULL OR lambda < 0 OR tolerance IS NULL OR tolerance < 0 OR min_questions IS NULL
       OR min_questions < 0 OR per_task_type IS NULL THEN
        RAISE EXCEPTION 'lambda, tolerance, min_questions and per_task_type must be given, and the numbers not negative'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'lambda: cost of one irrelevant note injected, in found lessons (e.g. 0.5); tolerance: '
                         'utility a cheaper rerank may lose (0); min_questions: questions a task_type needs for '
                         'settings of its own (50).';
    END IF;
    IF code_segments IS NULL OR code_segments NOT BETWEEN 0 AND 32 THEN
        RAISE EXCEPTION 'code_segments must be between 0 and 32, not %', code_segments
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'code_segments: windows of lines embedded beside each code input (0, the default: the '
                         'whole input alone).';
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
         WHERE _fb_input_kind(g.query) = 'prose'
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
    -- Code inputs: every candidate with what the learned decision reads, and the input's grades.
    SELECT jsonb_agg(jsonb_build_object(
               'query', g.query, 'n_segments', cardinality(v.segs),
               'graded', coalesce((SELECT jsonb_agg(jsonb_build_array(gr.note_ids[i], gr.grades[i]))
                                     FROM generate_subscripts(gr.note_ids, 1) i), '[]'),
               'candidates', coalesce((SELECT jsonb_agg(jsonb_build_object('id', c.id, 'doc', c.doc,
                                                                           'context', c.context,
                                                                           'cosine', c.similarity,
                                                                           'segment', c.segment) ORDER BY c.n)
                                         FROM _fb_code_candidates(g.query, v.vectors, _fb_task_type(g.task_type), 20,
                                                                  key)
                                              WITH ORDINALITY AS c(id, lesson, correction, similarity, created_at,
                                                                   segment, doc, context, n)), '[]')))
      INTO code_data
      FROM _fb_golden_questions(fb_calibrate.split) g
     CROSS JOIN LATERAL (SELECT _fb_segments(g.query, segmenting) AS segs) s
     CROSS JOIN LATERAL (SELECT s.segs, fb_embed_batch(ARRAY[g.query] || s.segs, true, key) AS vectors) v
      LEFT JOIN _fb_golden_grades(fb_calibrate.split) gr ON gr.golden_id = g.id
     WHERE _fb_input_kind(g.query) = 'code';
    IF data IS NULL AND code_data IS NULL THEN
        RAISE EXCEPTION 'feedback_golden has no % questions', coalesce(split, 'golden')
            USING ERRCODE = 'no_data_found',
                  HINT = 'Insert golden questions (split tune) and grade their notes before calibrating.';
    END IF;
    IF code_data IS NOT NULL THEN
        -- fb_retrieve embeds a code input as the decision was fitted: whole, and in as many segments.
        decision := _fb_fit_decision(code_data, max_notes => 5, embedding_model => key) || segmenting;
    END IF;

    result := CASE WHEN data IS NOT NULL
                   THEN _fb_calibrate_sweep(data, lambda, 3, per_task_type, min_questions, tolerance,
                                            _fb_setting('pg_feedback.rerank_stage')::integer)
                   ELSE jsonb_build_object('groups', jsonb_build_array(jsonb_build_object('group', '*'))) END;
    sel := result -> 'selective' -> 'policy';

    IF apply THEN
        DELETE FROM feedback_retrieval_settings;
        INSERT INTO feedback_retrieval_settings (task_type, rerank, rerank_floor, relative_cut, max_notes,
                                                 cosine_floor, cosine_relative_cut, cosine_max_notes,
                                                 rerank_max_pairs, rerank_min_cosine, rerank_cosine_gap,
                                                 rerank_decided, rerank_decided_gap, rerank_tie_margin,
                                                 cosine_tie_margin, decision, embedding_model, rerank_model,
                                                 calibrated_by, calibration)
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
               CASE WHEN g ->> 'group' = '*' THEN decision END,
               key, cross_encoder, _fb_actor(),
               jsonb_build_object('split', fb_calibrate.split, 'lambda', lambda, 'tolerance', tolerance,
                                  'questions', g -> 'questions', 'cross_encoder', g -> 'cross_encoder' -> 'summary',
                                  'cosine', g -> 'cosine' -> 'summary',
                                  'selective', CASE WHEN g ->> 'group' = '*' THEN result -> 'selective' END)
          FROM jsonb_array_elements(result -> 'groups') g;
    END IF;

    RETURN QUERY
    SELECT x.* FROM (
        SELECT g ->> 'group' AS grp, (g ->> 'questions')::integer, (g ->> 'rerank')::boolean,
               (g -> 'cross_encoder' ->> 'floor')::real, (g -> 'cross_encoder' ->> 'relative_cut')::real,
               (g -> 'cross_encoder' ->> 'max_notes')::integer,
               (g -> 'cosine' ->> 'floor')::real, (g -> 'cosine' ->> 'relative_cut')::real,
               (g -> 'cosine' ->> 'max_notes')::integer,
               (c -> 'summary' ->> 'recall')::real, (c -> 'summary' ->> 'precision')::real,
               (c -> 'summary' ->> 'no_answer_correct')::real, (c ->> 'utility')::real
          FROM jsonb_array_elements(result -> 'groups') g
         CROSS JOIN LATERAL (SELECT CASE WHEN (g ->> 'rerank')::boolean THEN g -> 'cross_encoder'
                                         ELSE g -> 'cosine' END AS c) chosen
         WHERE g ? 'questions'
         UNION ALL
        -- The learned decision for code inputs: what it gives on the inputs it was fitted on.
        SELECT '(code)', (decision -> 'fitted_on' ->> 'inputs')::integer, NULL, NULL, NULL,
               (decision ->> 'max_notes')::integer, NULL, NULL, NULL,
               (decision -> 'fitted_on' -> 'outcome' ->> 'recall')::real,
               (decision -> 'fitted_on' -> 'outcome' ->> 'precision')::real,
               (decision -> 'fitted_on' -> 'outcome' ->> 'clean_empty')::real, NULL
         WHERE decision IS NOT NULL) x
     ORDER BY x.grp <> '*', x.grp = '(code)', x.grp;
END $$;

COMMENT ON FUNCTION fb_calibrate(text, real, boolean, integer, real, boolean, integer) IS
    'Chooses fb_retrieve''s settings on the golden questions of a split (default tune): scores every question''s '
    '20 first-stage candidates with the cross-encoder once, then for cross-encoder and cosine ranking picks the '
    'floor, relative cut and most notes that maximise (lessons found - lambda x irrelevant notes injected) / '
    'questions (lambda: what one misleading note costs, in found lessons; default 0.5), per task_type with at '
    'least min_questions questions and for all (''*''); reranks a task_type only where that beats cosine; picks '
    'the cheapest selective-reranking bounds (fewest pairs at the 95th percentile, then on average) whose '
    'recall@3 and precision stay within tolerance of reranking every candidate, and the near-tie margins. With '
    'apply (default) it replaces the rows of feedback_retrieval_settings. Returns the chosen cut and its numbers '
    'per row (of the scorer the row uses). Prose questions choose these; code inputs (_fb_input_kind) fit the '
    'learned decision instead (_fb_fit_decision: logistic regression over each candidate''s features, the '
    'threshold that maximises the worst of applicable notes injected, injected notes that apply and clean inputs '
    'left empty, at most 5 notes; each input embedded whole and, with code_segments > 0, in that many windows of '
    'lines too, which fb_retrieve then embeds as well), stored on the ''*'' row (decision) and reported as row ''(code)'' (recall_at_3: '
    'applicable notes injected; precision: injected notes that apply; no_answer_correct: clean inputs left empty). '
    'Report on the other split with fb_eval(split => ''test'').';

REVOKE ALL ON FUNCTION _fb_segments(text, jsonb), fb_calibrate(text, real, boolean, integer, real, boolean, integer)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION _fb_segments(text, jsonb), fb_calibrate(text, real, boolean, integer, real, boolean, integer)
    TO feedback_reviewer;
