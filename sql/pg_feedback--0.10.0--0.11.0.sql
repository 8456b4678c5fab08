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
