-- pg_feedback: candidate search, the first stage of retrieval and of the near-duplicate check. Only notes the acting
-- role may see and only vectors of one model are compared: exact below pg_feedback.exact_scan_limit, else the slot's
-- HNSW index (iterative scan), or the task_type's own slice index (IVFFlat) once fb_maintain has built one; full-text
-- candidates for the hybrid first stage, bounded; the candidates of a code input.

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

-- Slice indexes. One global HNSW index finds 40-48% of a task_type's exact top 20 at 1M notes (the filter leaves the
-- iterative scan walking other task types' neighbours); a partial index per task_type finds 0.96-0.99 in a few
-- milliseconds. fb_maintain builds one for every task_type with at least pg_feedback.slice_index_min active notes
-- and drops it when the slice falls below half of that. Derived state: not dumped (after a restore fb_maintain
-- builds them again), and an index someone dropped by hand is simply not used.
CREATE TABLE feedback_slice_indexes (
    task_type       text NOT NULL,
    slot            smallint NOT NULL CHECK (slot IN (1, 2)),
    index_name      name NOT NULL UNIQUE,
    notes           bigint NOT NULL,
    built_at        timestamptz NOT NULL DEFAULT now(),
    build_ms        double precision NOT NULL,
    recall          real,
    recall_queries  integer,
    measured_at     timestamptz,
    PRIMARY KEY (task_type, slot)
);
COMMENT ON TABLE feedback_slice_indexes IS
    'The slice indexes (partial IVFFlat) fb_maintain built, one per (task_type, embedding slot): the active notes '
    'of the '
    'slice when it was built, how long the build took, and the candidate recall@20 against exact search that '
    'fb_eval_ann measured right after (random notes of the slice as queries). See feedback_index_status.';

CREATE FUNCTION _fb_slice_index(p_task_type text, vec text) RETURNS name
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

-- The one definition of a slice index: fb_maintain runs it, feedback_index_status shows it CONCURRENTLY. IVFFlat,
-- not HNSW: on stores full of near-duplicate lessons an HNSW graph's greedy search stays in the wrong cluster (at 1M
-- notes a 100,000-note slice found 79% of the exact top 20 at ef_search 400, some questions none of it), while lists
-- of sqrt(notes) with 20 probes found 99-100% in 1-4 ms, and build in about 4 s per 100,000 notes (HNSW: 13 s).
-- On l2_normalize(vector), which the stored unit vectors equal, so that only a query ordering by that expression (a
-- slice query of _fb_candidates) can use it: the global HNSW index on the column cannot take its place.
CREATE FUNCTION _fb_slice_index_statement(p_task_type text, slot smallint, by_hand boolean DEFAULT false,
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

-- The task_type's slice index (partial IVFFlat, 20 probes) when fb_maintain built one; else exact up to
-- pg_feedback.exact_scan_limit notes (perfect recall, cheap for small sets), else the global HNSW index. The index
-- paths use pgvector's iterative scans so that a selective filter (tenant, status) still yields k candidates. scoped is for
-- near-duplicate merging. SECURITY DEFINER: readers have no right on feedback_notes, and a view over it could not
-- use the HNSW index for ordering (a security-barrier view is never flattened). The slot's column names come from
-- a fixed list, so the dynamic SQL takes no caller text. pgvector's scan bounds are pinned too: a caller who lowered
-- them would get fewer candidates where other tenants' notes (invisible to it) crowd the scan, and learn from that
-- how many there are.
CREATE FUNCTION _fb_candidates(q vector(384), p_task_type text, k integer, mode text DEFAULT 'auto',
                               p_tenant text DEFAULT NULL, scoped boolean DEFAULT false, model text DEFAULT NULL)
    RETURNS TABLE (id bigint, distance double precision, lesson text, correction text, created_at timestamptz)
    LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    SET hnsw.iterative_scan = 'relaxed_order'
    SET hnsw.ef_search = 400
    SET hnsw.max_scan_tuples = 20000
    SET hnsw.scan_mem_multiplier = 1
    SET ivfflat.iterative_scan = 'relaxed_order'
    SET ivfflat.probes = 20
    SET ivfflat.max_probes = 32768
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

-- Not plainto_tsquery as is: it joins the lexemes with AND, which natural-language questions rarely satisfy.
CREATE FUNCTION _fb_search_terms(query text) RETURNS tsquery
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    SET search_path = pg_catalog, @extschema@, pg_temp
    RETURN nullif(replace(plainto_tsquery('pg_catalog.english'::regconfig, query)::text, ' & ', ' | '), '')::tsquery;
COMMENT ON FUNCTION _fb_search_terms(text) IS
    'Internal: the lexemes of a question OR-ed into a tsquery (NULL if none), for full-text candidates.';

-- Bounded: ranking every match of every lexeme cost 490 ms for a 100,000-note task_type at 1M notes. The planner's
-- own statistics (most_common_elems of search_vector, most_common_vals of task_type) estimate how many notes of the
-- task_type each lexeme matches; the rarest lexemes are kept while their estimated matches stay within
-- pg_feedback.lexical_rank_limit. Without statistics (never analysed) every lexeme is kept. A store where no
-- question reaches the limit ranks exactly what it did before.
CREATE FUNCTION _fb_lexical_terms(query text, p_task_type text, rank_limit integer) RETURNS tsquery
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, pg_temp
    BEGIN ATOMIC
        WITH lexemes AS (
            SELECT DISTINCT l
              FROM unnest(tsvector_to_array(to_tsvector('pg_catalog.english'::regconfig, query))) l
        ), stats AS (
            SELECT greatest(c.reltuples, 0) * coalesce(
                       (SELECT m.freq FROM unnest(t.most_common_vals::text::text[], t.most_common_freqs) m(v, freq)
                         WHERE m.v = p_task_type),
                       (1 - coalesce((SELECT sum(x) FROM unnest(t.most_common_freqs) x), 0))
                         / greatest(CASE WHEN t.n_distinct < 0 THEN -t.n_distinct * c.reltuples ELSE t.n_distinct END
                                    - coalesce(cardinality(t.most_common_vals::text::text[]), 0), 1)) AS slice_rows,
                   e.most_common_elems::text::text[] AS elems, e.most_common_elem_freqs AS freqs
              FROM pg_class c
              JOIN pg_namespace ns ON ns.oid = c.relnamespace
              JOIN pg_stats e ON e.schemaname = ns.nspname AND e.tablename = c.relname
                             AND e.attname = 'search_vector'
              JOIN pg_stats t ON t.schemaname = e.schemaname AND t.tablename = e.tablename AND t.attname = 'task_type'
             WHERE c.oid = 'feedback_notes'::regclass AND e.most_common_elems IS NOT NULL
        ), scored AS (
            SELECT x.l, coalesce((SELECT f.freq FROM unnest(s.elems, s.freqs[1:cardinality(s.elems)]) f(elem, freq)
                                   WHERE f.elem = x.l),
                                 s.freqs[cardinality(s.elems) + 1]) AS freq,
                   s.slice_rows
              FROM lexemes x CROSS JOIN stats s
        ), kept AS (
            SELECT l FROM lexemes WHERE NOT EXISTS (SELECT 1 FROM stats)
            UNION ALL
            SELECT r.l FROM (
                SELECT k.l, row_number() OVER w AS pos, sum(k.freq) OVER w * k.slice_rows AS matches
                  FROM scored k
                WINDOW w AS (ORDER BY k.freq, k.l)) r
             WHERE r.pos = 1 OR r.matches <= rank_limit
        )
        SELECT CASE WHEN (SELECT count(*) FROM kept) = (SELECT count(*) FROM lexemes) THEN _fb_search_terms(query)
                    ELSE (SELECT string_agg('''' || replace(replace(l, '\', '\\'), '''', '''''') || '''', ' | '
                                            ORDER BY l)::tsquery FROM kept) END;
    END;
COMMENT ON FUNCTION _fb_lexical_terms(text, text, integer) IS
    'Internal: the lexemes of a question OR-ed into a tsquery (NULL if none), keeping only the rarest while the '
    'notes of the task_type they are estimated to match (planner statistics of feedback_notes) stay within '
    'rank_limit; every lexeme (_fb_search_terms) when the table has no statistics yet or all stay within it.';

-- SECURITY DEFINER as _fb_candidates. At most pg_feedback.lexical_rank_limit matches are ranked (the terms come
-- from _fb_lexical_terms); the vector distance is computed only for the k returned. A task_type of at most
-- pg_feedback.exact_scan_limit notes is read note by note and the terms tested on each ("IS TRUE" keeps the
-- full-text index out): through the index, a common word's matches in the whole table are read first (145,000 rows,
-- 30 ms at 1M notes, for a task_type of 8,890). A larger task_type goes through the index.
CREATE FUNCTION _fb_lexical_candidates(q vector(384), terms tsquery, p_task_type text, k integer,
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

CREATE FUNCTION _fb_first_stage(query text, q vector(384), p_task_type text, candidate_k integer, model text)
    RETURNS TABLE (id bigint, lesson text, correction text, similarity real, created_at timestamptz,
                   fused double precision, source text)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        WITH settings AS (
            SELECT _fb_setting('pg_feedback.hybrid')::boolean AS hybrid,
                   _fb_setting('pg_feedback.hybrid_candidates')::integer AS lexical_k,
                   _fb_setting('pg_feedback.rrf_k')::integer AS rrf_k,
                   _fb_setting('pg_feedback.lexical_rank_limit')::integer AS rank_limit
        ), dense AS (
            SELECT c.id, c.lesson, c.correction, c.distance, c.created_at,
                   row_number() OVER (ORDER BY c.distance, c.id) AS r
              FROM _fb_candidates(q, p_task_type, candidate_k, model => model) c
        ), lexical AS (
            SELECT c.id, c.lesson, c.correction, c.distance, c.created_at,
                   row_number() OVER (ORDER BY c.text_rank DESC, c.id) AS r
              FROM settings s
             CROSS JOIN LATERAL _fb_lexical_candidates(q, _fb_lexical_terms(query, p_task_type, s.rank_limit),
                                                       p_task_type, s.lexical_k, model) c
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
    '(1 / (pg_feedback.rrf_k + rank) summed over both lists; the question''s rarest terms, _fb_lexical_terms); '
    'source says which list found each.';

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

-- Building takes a SHARE lock on feedback_notes for the build (writes wait; reads and retrieval go on): about 1 s
-- per 10,000 notes on 2 cores. CREATE INDEX CONCURRENTLY cannot run inside a function; a slice whose build would
-- hold writes too long can be built by hand with the statement feedback_index_status shows, then recorded by
-- running fb_maintain again.
CREATE FUNCTION fb_maintain(p_task_type text DEFAULT NULL, measure boolean DEFAULT true)
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

CREATE VIEW feedback_index_status AS
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
