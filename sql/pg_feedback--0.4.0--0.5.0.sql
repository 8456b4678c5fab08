-- pg_feedback 0.4.0 -> 0.5.0: concurrency-safe dedup and re-submission counting (re-submissions counted under
-- the near-duplicate locks, in one lock order; REPEATABLE READ and SERIALIZABLE fail with a retryable
-- serialization_failure instead of storing a near-duplicate), and the bad-input fixes found by the bad-input
-- matrix (tests/e2e/matrix.py). Nothing stored changes.
\echo Use "ALTER EXTENSION pg_feedback UPDATE TO '0.5.0'" to load this file. \quit

CREATE UNLOGGED TABLE feedback_pending_reports (
    xid           xid8 NOT NULL DEFAULT pg_current_xact_id(),
    ord           bigint GENERATED ALWAYS AS IDENTITY,
    content_hash  text NOT NULL,
    tenant        text,
    task_type     text NOT NULL,
    wrong_answer  text NOT NULL,
    source        text
);

CREATE INDEX feedback_pending_reports_xid_idx ON feedback_pending_reports (xid);

COMMENT ON TABLE feedback_pending_reports IS
    'Internal: re-submissions of stored notes seen by the insert trigger of the current statement, counted by its '
    'AFTER trigger (transaction-local rows, never visible to users).';

REVOKE ALL ON feedback_pending_reports FROM PUBLIC;

CREATE OR REPLACE FUNCTION _fb_count_reports() RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    rep record;
    stored record;
    counted integer := 0;
BEGIN
    FOR rep IN
        SELECT p.content_hash, p.tenant, count(*) AS reports,
               (array_agg(p.wrong_answer ORDER BY p.ord DESC) FILTER (WHERE p.wrong_answer <> ''))[1] AS wrong_answer,
               (array_agg(p.source ORDER BY p.ord DESC) FILTER (WHERE p.source IS NOT NULL))[1] AS source
          FROM feedback_pending_reports p
         WHERE p.xid = pg_current_xact_id()
         GROUP BY p.content_hash, p.tenant
         ORDER BY p.content_hash
    LOOP
        -- The stored note, or, if a reviewer's approval merged it away since the row trigger saw it, the note it
        -- was merged into (same tenant and task_type, so under the same lock).
        UPDATE feedback_notes f
           SET wrong_answer = CASE WHEN f.status = 'purged' THEN f.wrong_answer
                                   ELSE coalesce(rep.wrong_answer, f.wrong_answer) END,
               source = CASE WHEN f.status = 'purged' THEN f.source ELSE coalesce(rep.source, f.source) END,
               updated_at = now(),
               report_count = f.report_count + rep.reports
         WHERE f.id = coalesce(
                   (SELECT s.id FROM feedback_notes s
                     WHERE s.content_hash = rep.content_hash AND s.tenant IS NOT DISTINCT FROM rep.tenant),
                   (SELECT m.into_id FROM feedback_note_merges m
                     WHERE m.merged_hash = rep.content_hash ORDER BY m.merged_at DESC LIMIT 1))
        RETURNING f.id, f.status INTO stored;
        IF NOT FOUND THEN
            -- Edited into other content by its owner meanwhile: never drop a report silently.
            RAISE EXCEPTION 'the note re-submitted by this statement changed while the statement ran'
                USING ERRCODE = 'serialization_failure', HINT = 'Retry the statement.';
        END IF;
        counted := counted + rep.reports;
        IF stored.status <> 'active' THEN
            RAISE NOTICE 'note % is %: the report was counted, and it stays % (not retrieved)', stored.id,
                         stored.status, stored.status
                USING HINT = CASE stored.status
                                 WHEN 'deprecated' THEN 'A reviewer can bring it back with fb_restore.'
                                 WHEN 'pending' THEN 'It waits for a reviewer (feedback_review_queue).'
                                 WHEN 'rejected' THEN 'A reviewer rejected it; fb_approve would make it live.'
                                 ELSE 'Its text was purged; it is never retrieved again.' END;
        END IF;
    END LOOP;
    DELETE FROM feedback_pending_reports p WHERE p.xid = pg_current_xact_id();
    RETURN counted;
END $$;

COMMENT ON FUNCTION _fb_count_reports() IS
    'Internal: counts the re-submissions noted by the current statement on their stored notes (AFTER INSERT).';

CREATE OR REPLACE FUNCTION _fb_lock_dedup(tenants text[], task_types text[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    IF current_setting('transaction_isolation') IN ('read committed', 'read uncommitted') THEN
        PERFORM _fb_take_dedup_locks(tenants, task_types);
        RETURN;
    END IF;
    BEGIN
        PERFORM _fb_take_dedup_locks(tenants, task_types);
    EXCEPTION WHEN serialization_failure THEN
        RAISE EXCEPTION 'could not check for near-duplicates: another transaction stored notes of the same '
                        'task_type after this transaction''s snapshot was taken'
            USING ERRCODE = 'serialization_failure',
                  DETAIL = format('Transaction isolation is %s. %s', current_setting('transaction_isolation'),
                                  SQLERRM),
                  HINT = 'Retry the transaction. Under REPEATABLE READ and SERIALIZABLE a near-duplicate check '
                         'cannot see notes committed after the snapshot, so it fails rather than store a '
                         'duplicate; under READ COMMITTED concurrent ingests wait for each other instead.';
    END;
END $$;

COMMENT ON FUNCTION _fb_lock_dedup(text[], text[]) IS
    'Internal: takes the near-duplicate locks of (tenant, task_type) pairs in sorted order until the end of the '
    'transaction (serialization_failure with a hint when a newer ingest is invisible to this snapshot).';

CREATE OR REPLACE FUNCTION _fb_setting(name text) RETURNS text
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    IF current_setting(name, true) IS NULL THEN
        PERFORM fb_rerank_model();   -- loads the library, which defines its settings
    END IF;
    RETURN current_setting(name);
END $$;

COMMENT ON FUNCTION _fb_setting(text) IS
    'Internal: current_setting of a pg_feedback setting, loading the library first if this session has not yet.';

CREATE OR REPLACE FUNCTION _fb_take_dedup_locks(tenants text[], task_types text[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    -- Row locks in a table of the extension's own (an advisory lock key would be open to anyone to take).
    INSERT INTO feedback_dedup_locks (tenant, task_type)
    SELECT DISTINCT k.tenant, k.task_type FROM unnest(tenants, task_types) AS k(tenant, task_type)
     ORDER BY 1, 2
    ON CONFLICT DO NOTHING;
    PERFORM 1 FROM feedback_dedup_locks l
      JOIN (SELECT DISTINCT * FROM unnest(tenants, task_types) AS k(tenant, task_type)) k USING (tenant, task_type)
     ORDER BY l.tenant, l.task_type
       FOR UPDATE OF l;
    UPDATE feedback_dedup_locks l SET task_type = l.task_type
      FROM (SELECT DISTINCT * FROM unnest(tenants, task_types) AS k(tenant, task_type)) k
     WHERE l.tenant = k.tenant AND l.task_type = k.task_type;
END $$;

COMMENT ON FUNCTION _fb_take_dedup_locks(text[], text[]) IS
    'Internal: the locking and writing of _fb_lock_dedup, without its error handling.';

CREATE OR REPLACE FUNCTION _fb_candidate_filter(vec text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, pg_temp
    RETURN format('f.status = ''active'' AND f.%I = $3 AND f.%I IS NOT NULL '
                  'AND CASE WHEN $4 THEN (f.tenant = $5 OR (f.tenant IS NULL AND $5 IS NULL)) '
                  'ELSE f.tenant IS NULL OR f.tenant = ANY ($6) END', vec || '_model', vec);

CREATE OR REPLACE FUNCTION _fb_candidates(q vector(384), p_task_type text, k integer, mode text DEFAULT 'auto',
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

CREATE OR REPLACE FUNCTION _fb_first_stage(query text, q vector(384), p_task_type text, candidate_k integer, model text)
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

CREATE OR REPLACE FUNCTION _fb_log_retrieval(query text, task_type text, note_ids bigint[], scores real[], scored_by text,
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

CREATE OR REPLACE FUNCTION _fb_merge_near_duplicates(ids bigint[]) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    threshold double precision := _fb_setting('pg_feedback.dup_threshold')::double precision;
    model text;
    slot smallint;
    r record;
    near record;
    merged integer := 0;
BEGIN
    IF threshold >= 1 OR ids IS NULL THEN
        RETURN 0;
    END IF;
    SELECT a.slot, a.model INTO slot, model FROM _fb_active() a;
    PERFORM _fb_lock_dedup(array_agg(coalesce(f.tenant, '')), array_agg(f.task_type))
       FROM feedback_notes f WHERE f.id = ANY (ids);
    FOR r IN
        SELECT f.*, _fb_vector(f, slot) AS vec
          FROM unnest(ids) WITH ORDINALITY AS i(id, n) JOIN feedback_notes f USING (id)
         WHERE _fb_has_vector(f, slot, model) AND f.status = 'active' ORDER BY i.n
    LOOP
        -- The row may have absorbed or been absorbed by an earlier one of this batch.
        CONTINUE WHEN NOT EXISTS (SELECT 1 FROM feedback_notes f WHERE f.id = r.id);
        SELECT c.id, 1 - c.distance AS similarity INTO near
          FROM _fb_candidates(r.vec, r.task_type, 2, 'auto', r.tenant, true, model) c
         WHERE c.id <> r.id
         ORDER BY c.distance
         LIMIT 1;
        CONTINUE WHEN near.id IS NULL OR near.similarity < threshold;
        UPDATE feedback_notes
           SET report_count = report_count + r.report_count, source = r.source, updated_at = now()
         WHERE id = near.id AND status = 'active';
        CONTINUE WHEN NOT FOUND;   -- deprecated meanwhile by a reviewer: the new note stays
        INSERT INTO feedback_note_merges (merged_hash, into_id, similarity, task_type, lesson, correction, source,
                                          merged_by)
        VALUES (r.content_hash, near.id, near.similarity, r.task_type, r.lesson, r.correction, r.source, _fb_actor());
        INSERT INTO feedback_audit (actor, action, note_id, detail)
        VALUES (_fb_actor(), 'merge', near.id,
                jsonb_build_object('merged_hash', r.content_hash, 'similarity', round(near.similarity::numeric, 4)));
        -- Notes merged into this one earlier in the batch now belong to its target.
        UPDATE feedback_note_merges SET into_id = near.id WHERE into_id = r.id;
        DELETE FROM feedback_notes WHERE id = r.id;
        merged := merged + 1;
    END LOOP;
    RETURN merged;
END $$;

CREATE OR REPLACE FUNCTION _fb_notes_after_insert() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    chunk record;
    actor text := _fb_actor();
    new_ids bigint[];
    restored bigint;
    model text;
    slot smallint;
BEGIN
    SELECT array_agg(i.id ORDER BY i.id) FILTER (WHERE i.embedding_model IS NULL AND i.embedding_alt_model IS NULL
                                                    AND i.status IN ('active', 'pending')),
           count(*) FILTER (WHERE NOT (i.embedding_model IS NULL AND i.embedding_alt_model IS NULL
                                       AND i.status IN ('active', 'pending')))
      INTO new_ids, restored
      FROM inserted_notes i;
    -- A superuser's restore writes no audit row: it brings back the audit trail as it was dumped (and its id
    -- sequence after the rows), so a row written here would collide with one still to come. A reviewer cannot
    -- restore the audit trail, and its loads are audited.
    IF restored > 0 AND _fb_restoring('') = 'reviewer' THEN
        INSERT INTO feedback_audit (actor, action, reason, detail)
        VALUES (actor, 'restore', 'rows stored as sent by a reviewer (pg_feedback.restore_mode)',
                jsonb_build_object('rows', restored));
    ELSIF restored > 0 THEN
        PERFORM setval('feedback_notes_id_seq', m)
           FROM (SELECT max(i.id) AS m FROM inserted_notes i) x
          WHERE m > coalesce(pg_sequence_last_value('feedback_notes_id_seq'), 0);
    END IF;
    IF new_ids IS NOT NULL THEN
        SELECT a.slot, a.model INTO slot, model FROM _fb_lock_active_model() a;
        FOR chunk IN
            SELECT array_agg(id) AS ids, array_agg(fb_document_text(task_type, lesson)) AS docs
              FROM (SELECT i.id, i.task_type, i.lesson, (row_number() OVER ()) / 1024 AS part
                      FROM inserted_notes i WHERE i.id = ANY (new_ids)) s
             GROUP BY part
        LOOP
            -- Embed in its own step: inside the UPDATE, the planner's row estimate for unnest() would evaluate
            -- the STABLE call once at plan time and the executor again, running the model twice.
            PERFORM _fb_store_vectors(chunk.ids, fb_embed_batch(chunk.docs, false, model), slot, model);
        END LOOP;
    END IF;
    -- The near-duplicate locks of every (tenant, task_type) this statement adds to or counts a report on, in one
    -- sorted pass, before any row lock on a stored note (re-submissions counted, merges): concurrent ingests
    -- then take their locks in the same order and never deadlock.
    PERFORM _fb_lock_dedup(array_agg(k.tenant), array_agg(k.task_type))
       FROM (SELECT coalesce(i.tenant, '') AS tenant, i.task_type FROM inserted_notes i
              WHERE i.id = ANY (new_ids) AND i.status = 'active'
             UNION
             SELECT coalesce(p.tenant, ''), p.task_type FROM feedback_pending_reports p
              WHERE p.xid = pg_current_xact_id()) k
    HAVING count(*) > 0;
    PERFORM _fb_count_reports();
    IF new_ids IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO feedback_audit (actor, action, note_id, content_hash, new_status, reason, detail)
    SELECT actor, 'hold', i.id, i.content_hash, 'pending',
           CASE WHEN jsonb_array_length(i.screening) > 0 THEN 'flagged by fb_screen'
                ELSE 'pg_feedback.review = all' END,
           jsonb_build_object('rules', (SELECT coalesce(jsonb_agg(DISTINCT f ->> 'rule'), '[]')
                                          FROM jsonb_array_elements(i.screening) f))
      FROM inserted_notes i
     WHERE i.id = ANY (new_ids) AND i.status = 'pending';
    PERFORM _fb_merge_near_duplicates(array_agg(i.id ORDER BY i.id))
       FROM inserted_notes i WHERE i.id = ANY (new_ids) AND i.status = 'active';
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION _fb_resubmit(n feedback_notes) RETURNS feedback_notes
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    IF pg_trigger_depth() = 0 THEN
        RAISE EXCEPTION '_fb_resubmit is called by the insert trigger of feedback_notes only'
            USING ERRCODE = 'insufficient_privilege', HINT = 'Submit notes with INSERT, COPY or fb_ingest.';
    END IF;
    n := _fb_cleaned(n);
    IF NOT _fb_tenant_allowed(n.tenant) THEN
        RETURN n;   -- the insert goes on and is refused by its tenant check
    END IF;
    IF NOT EXISTS (SELECT 1 FROM feedback_notes f
                    WHERE f.content_hash = n.content_hash AND f.tenant IS NOT DISTINCT FROM n.tenant) THEN
        RETURN n;
    END IF;
    INSERT INTO feedback_pending_reports (content_hash, tenant, task_type, wrong_answer, source)
    VALUES (n.content_hash, n.tenant, n.task_type, coalesce(n.wrong_answer, ''),
            CASE WHEN n.source IS NULL OR _fb_normalize(n.source) <> '' THEN _fb_source(n.source) END);
    RETURN NULL;
END $$;

COMMENT ON FUNCTION _fb_resubmit(feedback_notes) IS
    'Internal: notes a re-submission of the stored note with the same content (counted by the statement''s AFTER '
    'trigger) and returns NULL; when no such note is stored, returns the note cleaned for storing.';

CREATE OR REPLACE FUNCTION _fb_settings(p_task_type text, p_model text)
    RETURNS TABLE (rerank boolean, rerank_floor real, relative_cut real, max_notes integer, cosine_floor real,
                   cosine_relative_cut real, cosine_max_notes integer, selective boolean, rerank_max_pairs integer,
                   rerank_min_cosine real, rerank_cosine_gap real, rerank_stage integer, rerank_decided real,
                   rerank_decided_gap real, rerank_tie_margin real, cosine_tie_margin real)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, pg_temp
    BEGIN ATOMIC
        SELECT coalesce(t.rerank, d.rerank, true) AND _fb_setting('pg_feedback.rerank')::boolean,
               coalesce(t.rerank_floor, d.rerank_floor, _fb_setting('pg_feedback.rerank_floor')::real),
               nullif(coalesce(t.relative_cut, d.relative_cut, _fb_setting('pg_feedback.relative_cut')::real), -1),
               coalesce(t.max_notes, d.max_notes, _fb_setting('pg_feedback.max_notes')::integer),
               coalesce(t.cosine_floor, d.cosine_floor, _fb_setting('pg_feedback.cosine_floor')::real),
               nullif(coalesce(t.cosine_relative_cut, d.cosine_relative_cut,
                               _fb_setting('pg_feedback.cosine_relative_cut')::real), -1),
               coalesce(t.cosine_max_notes, d.cosine_max_notes, _fb_setting('pg_feedback.max_notes')::integer),
               _fb_setting('pg_feedback.selective_rerank')::boolean,
               coalesce(t.rerank_max_pairs, d.rerank_max_pairs, _fb_setting('pg_feedback.rerank_max_pairs')::integer),
               coalesce(t.rerank_min_cosine, d.rerank_min_cosine, _fb_setting('pg_feedback.rerank_min_cosine')::real),
               coalesce(t.rerank_cosine_gap, d.rerank_cosine_gap, _fb_setting('pg_feedback.rerank_cosine_gap')::real),
               _fb_setting('pg_feedback.rerank_stage')::integer,
               coalesce(t.rerank_decided, d.rerank_decided, _fb_setting('pg_feedback.rerank_decided')::real),
               coalesce(t.rerank_decided_gap, d.rerank_decided_gap,
                        _fb_setting('pg_feedback.rerank_decided_gap')::real),
               coalesce(t.rerank_tie_margin, d.rerank_tie_margin, _fb_setting('pg_feedback.rerank_tie_margin')::real),
               coalesce(t.cosine_tie_margin, d.cosine_tie_margin, _fb_setting('pg_feedback.tie_margin')::real)
          FROM (VALUES (1)) AS one (x)
          LEFT JOIN feedback_retrieval_settings t
                 ON t.task_type = p_task_type AND (t.embedding_model IS NULL OR t.embedding_model = p_model)
                AND (t.rerank_model IS NULL OR t.rerank_model = fb_rerank_model())
          LEFT JOIN feedback_retrieval_settings d
                 ON d.task_type = '*' AND (d.embedding_model IS NULL OR d.embedding_model = p_model)
                AND (d.rerank_model IS NULL OR d.rerank_model = fb_rerank_model());
    END;

CREATE OR REPLACE FUNCTION fb_approve(note_id bigint, reason text DEFAULT NULL) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    -- The note's near-duplicate lock before its row, in the order ingests take them (see _fb_lock_dedup).
    PERFORM _fb_lock_dedup(ARRAY[coalesce(f.tenant, '')], ARRAY[f.task_type])
       FROM feedback_notes f WHERE f.id = note_id AND f.status IN ('pending', 'rejected');
    IF NOT _fb_set_status(note_id, '{pending,rejected}', 'active', 'approve', fb_redact(reason)) THEN
        RETURN false;
    END IF;
    -- Live now: like any new active note it may be a near-duplicate of one already there.
    PERFORM _fb_merge_near_duplicates(ARRAY[note_id]);
    RETURN true;
END $$;

CREATE OR REPLACE FUNCTION fb_calibrate(split text DEFAULT 'tune', lambda real DEFAULT 0.5, per_task_type boolean DEFAULT true,
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
    IF lambda IS NULL OR lambda < 0 OR tolerance IS NULL OR tolerance < 0 OR min_questions IS NULL
       OR min_questions < 0 OR per_task_type IS NULL THEN
        RAISE EXCEPTION 'lambda, tolerance, min_questions and per_task_type must be given, and the numbers not negative'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'lambda: cost of one irrelevant note injected, in found lessons (e.g. 0.5); tolerance: '
                         'utility a cheaper rerank may lose (0); min_questions: questions a task_type needs for '
                         'settings of its own (50).';
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
                                  _fb_setting('pg_feedback.rerank_stage')::integer);
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

CREATE OR REPLACE FUNCTION fb_eval(k integer DEFAULT 3, record boolean DEFAULT true, model text DEFAULT NULL,
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
    scorer text := CASE WHEN _fb_setting('pg_feedback.rerank')::boolean AND fb_rerank_model() <> ''
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

CREATE OR REPLACE FUNCTION fb_eval_ann(sample integer DEFAULT 100, k integer DEFAULT 20)
    RETURNS TABLE (task_type text, queries integer, recall real, ann_returned real)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
BEGIN
    IF sample IS NULL OR sample < 1 OR k IS NULL OR k NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'sample must be positive and k between 1 and 1000, not % and %', sample, k
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'sample: how many notes serve as queries (e.g. 100); k: neighbours compared (e.g. 20).';
    END IF;
    RETURN QUERY
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
END $$;

CREATE OR REPLACE FUNCTION fb_find_duplicate(task_type text, lesson text)
    RETURNS TABLE (id bigint, lesson text, similarity real, would_merge boolean)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT c.id, c.lesson, (1 - c.distance)::real,
               1 - c.distance >= _fb_setting('pg_feedback.dup_threshold')::double precision
                   AND _fb_setting('pg_feedback.dup_threshold')::double precision < 1
          FROM _fb_candidates(fb_embed(fb_document_text(fb_find_duplicate.task_type, fb_find_duplicate.lesson)),
                              _fb_task_type(fb_find_duplicate.task_type), 1) c
         WHERE _fb_normalize(fb_find_duplicate.lesson) <> '';
    END;

COMMENT ON FUNCTION fb_find_duplicate(text, text) IS
    'The active note of the task_type nearest to a lesson (active model), its cosine similarity, and whether ingesting the lesson '
    'would merge into it (similarity >= pg_feedback.dup_threshold). No row for a NULL or blank lesson.';

CREATE OR REPLACE FUNCTION fb_ingest_batch(notes fb_note_input[], tenant text DEFAULT NULL)
    RETURNS TABLE (id bigint, action text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    inserted text[];
BEGIN
    -- RETURNING lists the rows this INSERT really added: a re-submission of a stored note is turned into a
    -- counted report by the insert trigger and is not returned. Two sessions inserting the same new note at once
    -- meet at the content hash: the loser's whole INSERT is rolled back to its savepoint and run again, and then
    -- finds the winner's row and counts a report on it. Rows go in in content order, so two batches that share
    -- several new notes meet at the first of them and never deadlock at the content-hash index.
    FOR attempt IN 1..3 LOOP
        BEGIN
            WITH ins AS (
                INSERT INTO feedback_notes AS f (task_type, wrong_answer, correction, lesson, source, tenant)
                SELECT n.task_type, coalesce(n.wrong_answer, ''), n.correction, n.lesson, n.source, fb_ingest_batch.tenant
                  FROM unnest(notes) WITH ORDINALITY AS n(task_type, wrong_answer, correction, lesson, source, ord)
                 ORDER BY fb_content_hash(n.task_type, n.lesson, n.correction, fb_ingest_batch.tenant), ord
                RETURNING f.content_hash)
            SELECT coalesce(array_agg(ins.content_hash), '{}') INTO inserted FROM ins;
            EXIT;
        EXCEPTION WHEN unique_violation THEN
            -- Under REPEATABLE READ and SERIALIZABLE the winner's row stays invisible to this snapshot: running
            -- the INSERT again would fail the same way.
            IF current_setting('transaction_isolation') NOT IN ('read committed', 'read uncommitted') THEN
                RAISE EXCEPTION 'could not store the note: another transaction stored the same content after this '
                                'transaction''s snapshot was taken'
                    USING ERRCODE = 'serialization_failure',
                          DETAIL = format('Transaction isolation is %s.', current_setting('transaction_isolation')),
                          HINT = 'Retry the transaction: the retry counts a report on the stored note.';
            ELSIF attempt = 3 THEN
                RAISE;
            END IF;
        END;
    END LOOP;

    RETURN QUERY
    WITH input AS (
        -- The stored content hash: of the redacted text (the insert already refused blank or oversized fields).
        SELECT n.ord, fb_content_hash(n.task_type, fb_redact(n.lesson), fb_redact(n.correction),
                                      fb_ingest_batch.tenant) AS hash
          FROM unnest(notes) WITH ORDINALITY AS n(task_type, wrong_answer, correction, lesson, source, ord)
    ), outcome AS (
        SELECT * FROM _fb_ingest_outcomes((SELECT array_agg(hash) FROM input))
    )
    SELECT coalesce(o.into_id, o.id),
           CASE WHEN o.into_id IS NOT NULL THEN 'merged'
                WHEN c.hash IS NULL OR row_number() OVER (PARTITION BY i.hash ORDER BY i.ord) > 1 THEN
                     CASE WHEN o.status = 'active' THEN 'updated' ELSE o.status END
                WHEN o.status = 'pending' THEN 'pending'
                ELSE 'inserted' END
      FROM input i
      LEFT JOIN (SELECT DISTINCT unnest(inserted) AS hash) c ON c.hash = i.hash
      LEFT JOIN outcome o ON o.content_hash = i.hash
     ORDER BY i.ord;
END $$;

CREATE OR REPLACE FUNCTION fb_retrieve(query text, task_type text, candidate_k integer DEFAULT 20, final_k integer DEFAULT NULL,
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
    -- Nothing is asked: no note applies (an empty question's vector would still be near some note).
    IF query IS NULL OR task_type IS NULL OR _fb_normalize(query) = '' THEN
        RETURN;
    END IF;
    -- Embedded in its own step, through the backend's query cache; first, so that the library is loaded and its
    -- settings defined before they are read. Only notes embedded by the same model are compared with it.
    key := _fb_resolve_model(model);
    q := (fb_embed_batch(ARRAY[query], true, key))[1];
    IF model IS NOT NULL AND _fb_slot_of(key) IS NULL THEN
        RAISE EXCEPTION 'no note is embedded with model "%"', model
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('CALL fb_reembed(%L) (superuser) embeds the notes with it first; SELECT * FROM '
                                'feedback_embedding_slots shows which models hold vectors.', model);
    END IF;
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
    IF _fb_setting('pg_feedback.log_retrievals')::boolean THEN
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

REVOKE ALL ON FUNCTION _fb_setting(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION _fb_count_reports() FROM PUBLIC;
REVOKE ALL ON FUNCTION _fb_lock_dedup(text[], text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION _fb_take_dedup_locks(text[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION _fb_setting(text) TO feedback_reader;
