-- pg_feedback 0.11.0 -> 0.12.0: what a red-team pass found on the write and search paths, closed.
--
-- - A re-submission of a stored note (same content hash) updates its wrong answer, source and context only when it
--   comes from the role that stored the note and screens clean; from any other role it changes nothing on the
--   note. A report that differs from the stored note in anything (exact text: a correction that differs only in
--   white space or line breaks has the same hash; wrong answer, source, context) is kept whole in
--   feedback_note_merges (kind resubmission). Owner updates are audited (action resubmit).
-- - A near-duplicate lesson is merged only when its correction is a rewording of the older note's too; a different
--   correction under the same lesson (neither a rewording nor within cosine 0.92 with no change found) is a
--   revision (pg_feedback.revisions), never folded in. A merged report keeps
--   its wrong answer (feedback_note_merges.wrong_answer); fb_unmerge brings it back. A blank context is filled by a
--   merge only from the note's own author.
-- - A revision supersedes only a note of its own tenant and task_type (a reviewer's restored row may point
--   anywhere).
-- - The candidate search pins pgvector's scan bounds, so a caller cannot shrink the scan
--   until other tenants' notes show as missing candidates.
-- - Purging a note releases the older note it kept out of retrieval (keep_both, fb_find_conflicts); a note made
--   active again no longer points at a revision that is not live. Notes left so by earlier versions are released
--   here.
-- - fb_judge judges only notes of the reviewer's tenants (or shared ones) and is the only way to write
--   feedback_retrieval_judgments: reviewers lose INSERT and UPDATE on it, so judged_by is always the acting role.
-- - fb_find_conflicts(record => true) works on a task_type with notes of several tenants, and locks only the
--   caller's.
-- - fb_notes_by and fb_purge_by find and retire the rows a reviewer stored in restore mode under another name.
-- - feedback_worker (_fb_worker_status) shows the worker's queue, counters and loaded models (every database's
--   activity) only to roles that may read all statistics (pg_read_all_stats).

\echo Use "ALTER EXTENSION pg_feedback UPDATE TO '0.12.0'" to load this file. \quit

ALTER TABLE feedback_note_merges
    ADD COLUMN wrong_answer text NOT NULL DEFAULT '',
    ADD COLUMN kind text NOT NULL DEFAULT 'merge' CHECK (kind IN ('merge', 'resubmission'));
ALTER TABLE feedback_pending_reports
    ADD COLUMN lesson text NOT NULL DEFAULT '',
    ADD COLUMN correction text NOT NULL DEFAULT '',
    ADD COLUMN screened boolean NOT NULL DEFAULT false;
REVOKE INSERT, UPDATE ON feedback_retrieval_judgments FROM feedback_reviewer;
UPDATE feedback_notes o SET superseded_by = NULL, updated_at = now()
 WHERE o.status = 'active' AND o.superseded_by IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM feedback_notes n WHERE n.id = o.superseded_by AND n.status = 'active');

COMMENT ON TABLE feedback_note_merges IS
    'Provenance of near-duplicate merges: a submitted note (merged_hash = its content hash, its text and source) '
    'that was folded into an existing note (into_id) because fb_compare_notes called it a rewording of that note '
    '(similarity: their cosine); source and merged_by: who reported it. The surviving note keeps its own text and '
    'provenance; context and wrong_answer: the reviewed input and the answer it carried. kind merge: a rewording '
    'folded in; kind resubmission: a re-submission of the note''s own content (same content hash) that differed from '
    'the stored note in its exact text (white space, line breaks) or its wrong answer, source or context, which the '
    'note kept (only the role that stored a note updates those), similarity 1.';

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
    INSERT INTO feedback_pending_reports (content_hash, tenant, task_type, wrong_answer, source, context, lesson,
                                          correction, screened)
    VALUES (n.content_hash, n.tenant, n.task_type, coalesce(n.wrong_answer, ''),
            CASE WHEN n.source IS NULL OR _fb_normalize(n.source) <> '' THEN _fb_source(n.source) END,
            coalesce(n.context, ''), n.lesson, n.correction, jsonb_array_length(n.screening) > 0);
    RETURN NULL;
END $$;
COMMENT ON FUNCTION _fb_resubmit(feedback_notes) IS
    'Internal: notes a re-submission of the stored note with the same content (counted by the statement''s AFTER '
    'trigger) and returns NULL; when no such note is stored, returns the note cleaned for storing.';

CREATE OR REPLACE FUNCTION _fb_count_reports() RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    rep record;
    before feedback_notes;
    now_ feedback_notes;
    owner boolean;
    changed text[];
    counted integer := 0;
    actor text := _fb_actor();
BEGIN
    FOR rep IN
        SELECT p.content_hash, p.tenant, count(*) AS reports,
               (array_agg(p.wrong_answer ORDER BY p.ord DESC) FILTER (WHERE p.wrong_answer <> ''))[1] AS wrong_answer,
               (array_agg(p.source ORDER BY p.ord DESC) FILTER (WHERE p.source IS NOT NULL))[1] AS source,
               (array_agg(p.context ORDER BY p.ord DESC) FILTER (WHERE btrim(p.context) <> ''))[1] AS context,
               bool_or(p.screened) AS screened
          FROM feedback_pending_reports p
         WHERE p.xid = pg_current_xact_id()
         GROUP BY p.content_hash, p.tenant
         ORDER BY p.content_hash
    LOOP
        -- The stored note, or, if a reviewer's approval merged it away since the row trigger saw it, the note it
        -- was merged into (same tenant and task_type, so under the same lock).
        SELECT f.* INTO before FROM feedback_notes f
         WHERE f.id = coalesce(
                   (SELECT s.id FROM feedback_notes s
                     WHERE s.content_hash = rep.content_hash AND s.tenant IS NOT DISTINCT FROM rep.tenant),
                   (SELECT m.into_id FROM feedback_note_merges m
                     WHERE m.merged_hash = rep.content_hash ORDER BY m.merged_at DESC LIMIT 1))
           FOR UPDATE;
        IF NOT FOUND THEN
            -- Edited into other content by its owner meanwhile: never drop a report silently.
            RAISE EXCEPTION 'the note re-submitted by this statement changed while the statement ran'
                USING ERRCODE = 'serialization_failure', HINT = 'Retry the statement.';
        END IF;
        owner := before.status <> 'purged' AND before.created_by = actor AND NOT rep.screened;
        UPDATE feedback_notes f
           SET wrong_answer = CASE WHEN owner THEN coalesce(rep.wrong_answer, f.wrong_answer) ELSE f.wrong_answer END,
               source = CASE WHEN owner THEN coalesce(rep.source, f.source) ELSE f.source END,
               context = CASE WHEN owner THEN coalesce(rep.context, f.context) ELSE f.context END,
               updated_at = now(),
               report_count = f.report_count + rep.reports
         WHERE f.id = before.id
        RETURNING f.* INTO now_;
        -- Every report that says anything the note (as updated) does not, word for word.
        INSERT INTO feedback_note_merges (merged_hash, into_id, similarity, task_type, lesson, correction, source,
                                          merged_by, context, wrong_answer, kind)
        SELECT p.content_hash, now_.id, 1, now_.task_type, p.lesson, p.correction,
               coalesce(p.source, now_.source), actor, p.context, p.wrong_answer, 'resubmission'
          FROM feedback_pending_reports p
         WHERE p.xid = pg_current_xact_id() AND p.content_hash = rep.content_hash
           AND p.tenant IS NOT DISTINCT FROM rep.tenant AND now_.status <> 'purged'
           AND (p.lesson <> now_.lesson OR p.correction <> now_.correction
                OR (p.wrong_answer <> '' AND p.wrong_answer <> now_.wrong_answer)
                OR (p.source IS NOT NULL AND p.source <> now_.source)
                OR (btrim(p.context) <> '' AND p.context <> now_.context))
         ORDER BY p.ord;
        changed := ARRAY(SELECT c FROM (VALUES ('wrong_answer', now_.wrong_answer IS DISTINCT FROM before.wrong_answer),
                                               ('source', now_.source IS DISTINCT FROM before.source),
                                               ('context', now_.context IS DISTINCT FROM before.context)) v(c, d)
                          WHERE d);
        IF cardinality(changed) > 0 THEN
            INSERT INTO feedback_audit (actor, action, note_id, content_hash, detail)
            VALUES (actor, 'resubmit', now_.id, before.content_hash, jsonb_build_object('changed', to_jsonb(changed)));
        END IF;
        counted := counted + rep.reports;
        IF now_.status <> 'active' THEN
            RAISE NOTICE 'note % is %: the report was counted, and it stays % (not retrieved)', now_.id,
                         now_.status, now_.status
                USING HINT = CASE now_.status
                                 WHEN 'deprecated' THEN 'A reviewer can bring it back with fb_restore.'
                                 WHEN 'pending' THEN 'It waits for a reviewer (feedback_review_queue).'
                                 WHEN 'rejected' THEN 'A reviewer rejected it; fb_approve would make it live.'
                                 ELSE 'Its text was purged; it is never retrieved again.' END;
        END IF;
    END LOOP;
    -- This statement's reports, and any left by a transaction that has ended (none can be, as only the insert
    -- trigger notes them, but a report never outlives its transaction).
    DELETE FROM feedback_pending_reports p
     WHERE p.xid = pg_current_xact_id() OR p.xid < pg_snapshot_xmin(pg_current_snapshot());
    RETURN counted;
END $$;
COMMENT ON FUNCTION _fb_count_reports() IS
    'Internal: counts the re-submissions noted by the current statement on their stored notes (AFTER INSERT).';

CREATE OR REPLACE FUNCTION _fb_merge_near_duplicates(ids bigint[]) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    mode text := _fb_setting('pg_feedback.revisions');
    model text;
    slot smallint;
    r record;
    near_ids bigint[];
    near_lessons text[];
    near_sims double precision[];
    near record;
    verdicts jsonb[];
    verdict jsonb;
    k integer;
    merged integer := 0;
BEGIN
    IF _fb_setting('pg_feedback.dup_threshold')::double precision >= 1 OR ids IS NULL THEN
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
        CONTINUE WHEN NOT EXISTS (SELECT 1 FROM feedback_notes f WHERE f.id = r.id AND f.status = 'active');
        -- Within a batch a row is compared with the rows before it, never with a later one: the older note of a
        -- pair is the one stored first.
        SELECT nn.ids, nn.lessons, nn.similarities INTO near_ids, near_lessons, near_sims
          FROM _fb_near_neighbours(r.vec, r.task_type, r.tenant, r.id, model, ids) nn;
        CONTINUE WHEN near_ids IS NULL;
        -- The nearest neighbour that is not another lesson decides (one model run for all residuals).
        verdicts := _fb_compare_neighbours(near_lessons, r.lesson, near_sims, model);
        k := (SELECT min(i) FROM generate_subscripts(verdicts, 1) i WHERE verdicts[i]->>'verdict' <> 'distinct');
        CONTINUE WHEN k IS NULL;
        verdict := verdicts[k];
        SELECT f.id, near_sims[k] AS similarity, f.correction INTO near
          FROM feedback_notes f WHERE f.id = near_ids[k];
        IF verdict->>'verdict' = 'duplicate' THEN
            -- The same lesson is merged only with the same correction: a rewording, or one within cosine 0.92 (where
            -- notes merged before 0.8.0) in which the comparison found no change. A correction that says something
            -- else under it changes the older note (a planted note cannot absorb the corrections that follow it).
            verdict := _fb_compare_lessons(near.correction, r.correction, r.task_type, model => model);
            IF verdict->>'verdict' = 'distinct' AND (verdict->>'similarity')::double precision >= 0.92 THEN
                verdict := jsonb_build_object('verdict', 'duplicate');
            END IF;
            IF verdict->>'verdict' <> 'duplicate' THEN
                verdict := jsonb_build_object('verdict', 'revision', 'kind',
                                              coalesce(verdict->>'kind', 'changed_correction'));
            END IF;
        END IF;
        IF verdict->>'verdict' = 'revision' THEN
            INSERT INTO feedback_audit (actor, action, note_id, content_hash, detail)
            VALUES (_fb_actor(), 'revision', r.id, r.content_hash,
                    jsonb_build_object('revises', near.id, 'kind', verdict->'kind', 'mode', mode,
                                       'similarity', round(near.similarity::numeric, 4)));
            UPDATE feedback_notes
               SET supersedes = near.id,
                   status = CASE WHEN mode = 'review' THEN 'pending' ELSE status END,
                   updated_at = now()
             WHERE id = r.id;
            IF mode = 'keep_both' THEN
                -- Both stay live; retrieval takes the newer (feedback_conflicts lists the pair).
                UPDATE feedback_notes SET superseded_by = r.id WHERE id = near.id;
                CONTINUE;
            END IF;
            IF mode = 'review' THEN
                INSERT INTO feedback_audit (actor, action, note_id, content_hash, old_status, new_status, reason)
                VALUES (_fb_actor(), 'hold', r.id, r.content_hash, 'active', 'pending',
                        format('revises #%s', near.id));
            ELSE
                PERFORM _fb_supersede(near.id, r.id);
            END IF;
            CONTINUE;
        END IF;
        -- A rewording: the older note counts the report and keeps its text, source and created_by (a blank context
        -- is filled only from its own author's report, screened clean); the report is kept whole.
        UPDATE feedback_notes
           SET report_count = report_count + r.report_count, updated_at = now(),
               context = CASE WHEN btrim(context) = '' AND created_by = r.created_by
                                   AND jsonb_array_length(r.screening) = 0
                              THEN r.context ELSE context END
         WHERE id = near.id AND status = 'active';
        CONTINUE WHEN NOT FOUND;   -- deprecated meanwhile by a reviewer: the new note stays
        INSERT INTO feedback_note_merges (merged_hash, into_id, similarity, task_type, lesson, correction, source,
                                          merged_by, context, wrong_answer)
        VALUES (r.content_hash, near.id, near.similarity, r.task_type, r.lesson, r.correction, r.source, _fb_actor(),
                r.context, r.wrong_answer);
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
COMMENT ON FUNCTION _fb_merge_near_duplicates(bigint[]) IS
    'Internal: compares new active notes with their nearest active neighbours of the same task_type and tenant '
    '(fb_compare_notes, active model): merges rewordings, records revisions and supersedes per '
    'pg_feedback.revisions. Runs inside the insert trigger with the owner''s rights.';

CREATE OR REPLACE FUNCTION _fb_supersede(older bigint, newer bigint) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    hash text;
BEGIN
    -- Only a note of the same tenant and task_type: a revision a reviewer restored may point anywhere.
    UPDATE feedback_notes o SET status = 'superseded', superseded_by = newer, updated_at = now()
      FROM feedback_notes n
     WHERE o.id = older AND o.status = 'active' AND n.id = newer
       AND o.tenant IS NOT DISTINCT FROM n.tenant AND o.task_type = n.task_type
    RETURNING o.content_hash INTO hash;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO feedback_audit (actor, action, note_id, content_hash, old_status, new_status, reason, detail)
    VALUES (_fb_actor(), 'supersede', older, hash, 'active', 'superseded', format('revised by #%s', newer),
            jsonb_build_object('superseded_by', newer));
    RETURN true;
END $$;
COMMENT ON FUNCTION _fb_supersede(bigint, bigint) IS
    'Internal: an active note becomes superseded by a newer live note of the same tenant and task_type that revises '
    'it (audited); false when it is no longer active or is another tenant''s or task_type''s.';

CREATE OR REPLACE FUNCTION _fb_candidates(q vector(384), p_task_type text, k integer, mode text DEFAULT 'auto',
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

CREATE OR REPLACE FUNCTION _fb_release_revised(note_id bigint) RETURNS void
    LANGUAGE sql
    SET search_path = pg_catalog, @extschema@, pg_temp
    BEGIN ATOMIC
        UPDATE feedback_notes SET superseded_by = NULL, updated_at = now()
         WHERE superseded_by = _fb_release_revised.note_id AND status = 'active';
    END;
COMMENT ON FUNCTION _fb_release_revised(bigint) IS
    'Internal: a note leaving retrieval (deprecated, purged) releases the older notes it kept out as their live '
    'revision (pg_feedback.revisions = keep_both, fb_find_conflicts(record => true)).';

CREATE OR REPLACE FUNCTION _fb_blank_merges(ids bigint[]) RETURNS integer
    LANGUAGE sql
    SET search_path = pg_catalog, @extschema@, pg_temp
    BEGIN ATOMIC
        WITH blanked AS (
            UPDATE feedback_note_merges m
               SET lesson = '[purged]', correction = '[purged]', context = '', wrong_answer = ''
             WHERE m.id = ANY (_fb_blank_merges.ids)
            RETURNING 1)
        SELECT count(*)::integer FROM blanked;
    END;
COMMENT ON FUNCTION _fb_blank_merges(bigint[]) IS
    'Internal: removes the text of merged reports (feedback_note_merges ids): what every purge does to them. Returns '
    'how many.';

CREATE OR REPLACE FUNCTION _fb_set_status(note_id bigint, from_status text[], to_status text, action text, reason text)
    RETURNS boolean
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    old text;
    hash text;
BEGIN
    SELECT f.status, f.content_hash INTO old, hash
      FROM feedback_notes f WHERE f.id = note_id AND _fb_tenant_allowed(f.tenant) FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no note with id %', coalesce(note_id::text, 'NULL')
            USING ERRCODE = 'no_data_found',
                  HINT = 'Take the id from feedback_review_queue, fb_retrieve or fb_ingest''s result.';
    END IF;
    IF NOT old = ANY (from_status) THEN
        RETURN false;
    END IF;
    -- A note made active again no longer points at a revision that is not live itself.
    UPDATE feedback_notes f
       SET status = to_status, updated_at = now(),
           superseded_by = CASE WHEN old = 'superseded'
                                  OR (to_status = 'active' AND NOT EXISTS (SELECT 1 FROM feedback_notes s
                                                                           WHERE s.id = f.superseded_by
                                                                             AND s.status = 'active'))
                                THEN NULL ELSE f.superseded_by END
     WHERE f.id = note_id;
    IF old = 'active' THEN
        PERFORM _fb_release_revised(note_id);
    END IF;
    INSERT INTO feedback_audit (actor, action, note_id, content_hash, old_status, new_status, reason)
    VALUES (_fb_actor(), action, note_id, hash, old, to_status, reason);
    RETURN true;
END $$;
COMMENT ON FUNCTION _fb_set_status(bigint, text[], text, text, text) IS
    'Internal: one audited status change of a note the acting role may see.';

CREATE OR REPLACE FUNCTION fb_merge(note_id bigint, into_id bigint, reason text DEFAULT NULL) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    n feedback_notes;
    t feedback_notes;
    slot smallint := (SELECT a.slot FROM _fb_active() a);
BEGIN
    SELECT * INTO n FROM feedback_notes f WHERE f.id = note_id AND _fb_tenant_allowed(f.tenant);
    SELECT * INTO t FROM feedback_notes f WHERE f.id = into_id AND _fb_tenant_allowed(f.tenant);
    IF n.id IS NULL OR t.id IS NULL THEN
        RAISE EXCEPTION 'no note with id %', coalesce(CASE WHEN n.id IS NULL THEN note_id ELSE into_id END::text, 'NULL')
            USING ERRCODE = 'no_data_found', HINT = 'Take the ids from feedback_review_queue (id, revises).';
    END IF;
    IF n.status <> 'pending' OR t.status <> 'active' OR n.id = t.id OR n.task_type <> t.task_type
       OR n.tenant IS DISTINCT FROM t.tenant THEN
        RAISE EXCEPTION 'note % cannot be merged into note %', note_id, into_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('Note %s is %s, note %s is %s.', n.id, n.status, t.id, t.status),
                  HINT = 'Merge a pending note into an active note of the same task_type and tenant.';
    END IF;
    PERFORM _fb_lock_dedup(ARRAY[coalesce(t.tenant, '')], ARRAY[t.task_type]);
    UPDATE feedback_notes SET report_count = report_count + n.report_count, updated_at = now(),
           context = CASE WHEN btrim(context) = '' THEN n.context ELSE context END
     WHERE id = t.id;
    INSERT INTO feedback_note_merges (merged_hash, into_id, similarity, task_type, lesson, correction, source,
                                      merged_by, context, wrong_answer)
    VALUES (n.content_hash, t.id, coalesce(1 - (_fb_vector(n, slot) <=> _fb_vector(t, slot)), 0), n.task_type,
            n.lesson, n.correction, n.source, n.created_by, n.context, n.wrong_answer);
    INSERT INTO feedback_audit (actor, action, note_id, content_hash, old_status, reason, detail)
    VALUES (_fb_actor(), 'merge', t.id, n.content_hash, n.status, fb_redact(reason),
            jsonb_build_object('merged_hash', n.content_hash, 'merged_note', n.id, 'by_reviewer', true));
    UPDATE feedback_note_merges m SET into_id = t.id WHERE m.into_id = n.id;
    DELETE FROM feedback_notes f WHERE f.id = n.id;
    RETURN true;
END $$;
COMMENT ON FUNCTION fb_merge(bigint, bigint, text) IS
    'Reviewer: merges a pending note (a revision held for review that was a rewording after all) into an active '
    'note of the same task_type and tenant: the active note keeps its text, source and created_by and counts the '
    'reports; the merged one is recorded in feedback_note_merges (its reporter as merged_by). Audited.';

CREATE OR REPLACE FUNCTION _fb_purge_note(note_id bigint, why text, action text, merges_of text DEFAULT NULL)
    RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    old text;
    hash text;
    merges integer;
    kept integer;
BEGIN
    SELECT f.status, f.content_hash INTO old, hash
      FROM feedback_notes f WHERE f.id = note_id AND _fb_tenant_allowed(f.tenant) FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no note with id %', coalesce(note_id::text, 'NULL')
            USING ERRCODE = 'no_data_found',
                  HINT = 'Take the id from feedback_notes or fb_ingest''s result; for the text of a merged report '
                         'use fb_purge_merged(merged_hash, reason).';
    END IF;
    UPDATE feedback_notes
       SET wrong_answer = '', correction = '[purged]', lesson = '[purged]', context = '', embedding = NULL,
           embedding_model = NULL,
           embedding_alt = NULL, embedding_alt_model = NULL, screening = '[]', status = 'purged', updated_at = now()
     WHERE id = note_id;
    PERFORM _fb_release_revised(note_id);
    merges := _fb_blank_merges(ARRAY(SELECT m.id FROM feedback_note_merges m
                                      WHERE m.into_id = note_id AND (merges_of IS NULL OR m.merged_by = merges_of)));
    SELECT count(*) INTO kept FROM feedback_note_merges m WHERE m.into_id = note_id AND m.lesson <> '[purged]';
    INSERT INTO feedback_audit (actor, action, note_id, content_hash, old_status, new_status, reason, detail)
    VALUES (_fb_actor(), action, note_id, hash, old, 'purged', why,
            jsonb_build_object('merge_records_cleared', merges, 'merge_records_kept', kept));
    RETURN merges;
END $$;
COMMENT ON FUNCTION _fb_purge_note(bigint, text, text, text) IS
    'Internal: removes a note''s text and that of the merge records folded into it (all, or one role''s), audited.';

CREATE OR REPLACE FUNCTION fb_purge_merged(merged_hash text, reason text) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    why text := _fb_require_reason(reason, 'fb_purge_merged');
    cleared integer;
BEGIN
    cleared := _fb_blank_merges(ARRAY(SELECT m.id FROM feedback_note_merges m JOIN feedback_notes t ON t.id = m.into_id
                                       WHERE _fb_tenant_allowed(t.tenant)
                                         AND m.merged_hash = fb_purge_merged.merged_hash));
    IF cleared = 0 THEN
        RAISE EXCEPTION 'no merge record with merged_hash "%"', merged_hash
            USING ERRCODE = 'no_data_found', HINT = 'Take merged_hash from feedback_note_merges.';
    END IF;
    INSERT INTO feedback_audit (actor, action, content_hash, reason, detail)
    VALUES (_fb_actor(), 'purge_merged', merged_hash, why, jsonb_build_object('merge_records_cleared', cleared));
    RETURN cleared;
END $$;
COMMENT ON FUNCTION fb_purge_merged(text, text) IS
    'Reviewer: removes the text of a report that was merged into another note (feedback_note_merges, by its '
    'merged_hash) for a leaked secret; returns how many merge records were cleared. Audited.';

CREATE OR REPLACE FUNCTION fb_unmerge(merge_id bigint, reason text DEFAULT NULL) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    m feedback_note_merges;
    t feedback_notes;
    review text := _fb_setting('pg_feedback.review');
    new_id bigint;
BEGIN
    SELECT * INTO m FROM feedback_note_merges WHERE id = merge_id;
    SELECT * INTO t FROM feedback_notes WHERE id = m.into_id;
    IF m.id IS NULL OR NOT _fb_tenant_allowed(t.tenant) THEN
        RAISE EXCEPTION 'no merged report with id %', merge_id
            USING ERRCODE = 'no_data_found', HINT = 'Take the id from feedback_note_merges.';
    END IF;
    IF m.kind = 'resubmission' THEN
        RAISE EXCEPTION 'report % re-submitted note %''s own content: there is no other note to bring back', merge_id,
                        m.into_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Read its text in feedback_note_merges; fb_ingest it with the content you want as a new note.';
    END IF;
    IF m.lesson = '[purged]' THEN
        RAISE EXCEPTION 'the text of merged report % was purged', merge_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A purged report has no text to bring back.';
    END IF;
    PERFORM _fb_lock_dedup(ARRAY[coalesce(t.tenant, '')], ARRAY[t.task_type]);
    -- Held for a reviewer, so it cannot merge straight back before anyone has looked at it.
    PERFORM set_config('pg_feedback.review', 'all', true);
    INSERT INTO feedback_notes (task_type, wrong_answer, correction, lesson, source, tenant, context)
    VALUES (m.task_type, m.wrong_answer, m.correction, m.lesson, m.source, t.tenant, m.context)
    RETURNING id INTO new_id;
    PERFORM set_config('pg_feedback.review', review, true);
    IF new_id IS NULL THEN
        -- The same content was stored since: the insert counted a report on it.
        SELECT f.id INTO new_id FROM feedback_notes f WHERE f.content_hash = m.merged_hash;
    ELSE
        UPDATE feedback_notes SET created_by = m.merged_by WHERE id = new_id;
    END IF;
    DELETE FROM feedback_note_merges WHERE id = merge_id;
    UPDATE feedback_notes SET report_count = greatest(report_count - 1, 1), updated_at = now() WHERE id = t.id;
    INSERT INTO feedback_audit (actor, action, note_id, content_hash, reason, detail)
    VALUES (_fb_actor(), 'unmerge', new_id, m.merged_hash, fb_redact(reason),
            jsonb_build_object('merge_id', merge_id, 'from_note', t.id, 'merged_by', m.merged_by));
    RETURN new_id;
END $$;
COMMENT ON FUNCTION fb_unmerge(bigint, text) IS
    'Reviewer: turns a merged report (feedback_note_merges.id) back into its own note: its text, source, context and '
    'reporter as a new pending note of the same task_type and tenant (fb_approve puts it live; a revision of the '
    'note it was merged into then supersedes it). The note it was folded into counts one report less. Returns the '
    'new note''s id. Audited.';

CREATE OR REPLACE FUNCTION fb_find_conflicts(task_type text, record boolean DEFAULT false)
    RETURNS TABLE (older_id bigint, newer_id bigint, kind text, similarity real, older_lesson text,
                   newer_lesson text, recorded boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    tt text := _fb_task_type(task_type);
    slot smallint;
    model text;
    n record;
    nn record;
    verdicts jsonb[];
BEGIN
    SELECT a.slot, a.model INTO slot, model FROM _fb_active() a;
    IF record THEN
        PERFORM _fb_lock_dedup(array_agg(s.tenant), array_agg(tt))
           FROM (SELECT DISTINCT coalesce(f.tenant, '') AS tenant FROM feedback_notes f
                  WHERE f.task_type = tt AND f.status = 'active' AND _fb_tenant_allowed(f.tenant)) s;
    END IF;
    FOR n IN
        SELECT f.id, f.lesson, f.tenant, f.supersedes, _fb_vector(f, slot) AS vec
          FROM feedback_notes f
         WHERE f.task_type = tt AND f.status = 'active' AND _fb_has_vector(f, slot, model)
           AND _fb_tenant_allowed(f.tenant)
         ORDER BY f.id
    LOOP
        SELECT * INTO nn FROM _fb_near_neighbours(n.vec, tt, n.tenant, n.id, model);
        CONTINUE WHEN nn.ids IS NULL;
        verdicts := _fb_compare_neighbours(nn.lessons, n.lesson, nn.similarities, model);
        FOR i IN 1..cardinality(verdicts) LOOP
            CONTINUE WHEN verdicts[i]->>'verdict' <> 'revision';
            older_id := nn.ids[i];
            newer_id := n.id;
            kind := verdicts[i]->>'kind';
            similarity := nn.similarities[i];
            older_lesson := nn.lessons[i];
            newer_lesson := n.lesson;
            recorded := n.supersedes IS NOT DISTINCT FROM older_id;
            IF record AND n.supersedes IS NULL THEN
                UPDATE feedback_notes SET supersedes = older_id WHERE id = n.id;
                UPDATE feedback_notes SET superseded_by = n.id WHERE id = older_id AND superseded_by IS NULL;
                INSERT INTO feedback_audit (actor, action, note_id, detail)
                VALUES (_fb_actor(), 'conflict', n.id,
                        jsonb_build_object('revises', older_id, 'kind', kind, 'similarity', round(similarity::numeric, 4)));
                n.supersedes := older_id;
                recorded := true;
            END IF;
            RETURN NEXT;
        END LOOP;
    END LOOP;
END $$;
COMMENT ON FUNCTION fb_find_conflicts(text, boolean) IS
    'Reviewer: active notes of a task_type that a newer active note revises (fb_compare_notes verdict revision), '
    'found by comparing each with its older near neighbours: stores loaded with merging off, restored dumps, notes '
    'from versions that merged by cosine alone. record => true links each pair (supersedes, superseded_by): '
    'feedback_conflicts lists it and fb_retrieve injects only the newer until a reviewer settles it.';

CREATE OR REPLACE FUNCTION fb_judge(retrieval_id bigint, note_id bigint, relevant boolean)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
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
    IF NOT EXISTS (SELECT 1 FROM feedback_notes f WHERE f.id = fb_judge.note_id AND _fb_tenant_allowed(f.tenant)) THEN
        RAISE EXCEPTION 'no note with id %', note_id
            USING ERRCODE = 'no_data_found', HINT = 'Judge notes of your own tenants or shared ones.';
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

REVOKE ALL ON FUNCTION _fb_release_revised(bigint), _fb_blank_merges(bigint[]) FROM PUBLIC;

-- The learned decision for code inputs reads the input's own vector too (its gate: does any note apply to
-- this input at all?). The seven-argument _fb_decide keeps its C symbol (src/compat.rs) for 0.11.0 databases
-- still running a newer library; the new one has its own.
DROP FUNCTION _fb_decide(text, text[], text[], real[], real[], integer, jsonb);
-- pg_feedback::decide::_fb_decide_for
CREATE  FUNCTION "_fb_decide"(
	"query" TEXT, /* & str */
	"docs" TEXT[], /* Vec < Option < String > > */
	"contexts" TEXT[], /* Vec < Option < String > > */
	"cosines" real[], /* Vec < Option < f32 > > */
	"segment_cosines" real[], /* Vec < Option < f32 > > */
	"n_segments" INT, /* i32 */
	"decision" jsonb, /* JsonB */
	"query_vector" real[] /* Vec < Option < f32 > > */
) RETURNS real[] /* Vec < f32 > */
IMMUTABLE STRICT PARALLEL SAFE 
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_decide_for_wrapper';
REVOKE ALL ON FUNCTION _fb_decide(text, text[], text[], real[], real[], integer, jsonb, real[]) FROM PUBLIC;

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

CREATE OR REPLACE FUNCTION fb_calibrate(split text DEFAULT 'tune', lambda real DEFAULT 0.5, per_task_type boolean DEFAULT true,
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
               'query', g.query, 'vector', v.vectors[1]::real[], 'n_segments', cardinality(v.segs),
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
    'learned decision instead (_fb_fit_decision: logistic regression over each candidate''s features times a gate, '
    'logistic regression over the input''s vector that tells whether any note applies to it; the '
    'threshold that maximises the worst of applicable notes injected, injected notes that apply and clean inputs '
    'left empty, at most 5 notes; each input embedded whole and, with code_segments > 0, in that many windows of '
    'lines too, which fb_retrieve then embeds as well), stored on the ''*'' row (decision) and reported as row ''(code)'' (recall_at_3: '
    'applicable notes injected; precision: injected notes that apply; no_answer_correct: clean inputs left empty). '
    'Report on the other split with fb_eval(split => ''test'').';

-- _fb_worker_status (so feedback_worker) shows the worker's queue, counters and loaded models only to roles that
-- may read all statistics: the library decides, the view is unchanged; its comment says so.
COMMENT ON VIEW feedback_worker IS
    'The shared inference worker (pg_feedback in shared_preload_libraries): mode this session uses (worker or backend), '
    'pid, start time, restarts, runners (model runs at once) and intra-op threads per runner, whether requests of '
    'different sessions share model runs, loaded models '
    '(kind: name@sha256 of the weights), requests queued and taken (running or waiting for a runner) now, and since '
    'server start: batches (worker '
    'wake-ups that answered requests), requests, texts embedded, pairs scored, model runs, texts and pairs per model run, '
    'requests per batch, total time requests waited in the queue and time spent running models (ms), and errors. '
    'Without the preloaded library only mode is set. The queue, the counters and the loaded models are the whole '
    'cluster''s: NULL unless the caller may read all statistics (pg_read_all_stats, pg_monitor, a superuser).';

-- fb_notes_by lists, and fb_purge_by retires, the rows a reviewer stored as sent (restore mode) under another
-- role's name: the restore's audit row says who stored them.
CREATE OR REPLACE FUNCTION fb_notes_by(role text, since timestamptz DEFAULT '-infinity')
    RETURNS TABLE (kind text, note_id bigint, merged_hash text, status text, task_type text, tenant text,
                   lesson text, correction text, source text, at timestamptz)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    IF role IS NULL OR _fb_normalize(role) = '' OR since IS NULL THEN
        RAISE EXCEPTION 'fb_notes_by needs a role and a moment, not %, %', coalesce(quote_literal(role), 'NULL'),
                        coalesce(since::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'For example fb_notes_by(''app_writer'', now() - interval ''7 days''); since defaults to '
                         'all time.';
    END IF;
    RETURN QUERY
    SELECT 'note', f.id, f.content_hash, f.status, f.task_type, f.tenant, f.lesson, f.correction, f.source,
           f.created_at
      FROM feedback_notes f
     WHERE f.created_by = fb_notes_by.role AND f.created_at >= since AND _fb_tenant_allowed(f.tenant)
    UNION ALL
    SELECT 'merged', m.into_id, m.merged_hash, t.status, m.task_type, t.tenant, m.lesson, m.correction, m.source,
           m.merged_at
      FROM feedback_note_merges m JOIN feedback_notes t ON t.id = m.into_id
     WHERE m.merged_by = fb_notes_by.role AND m.merged_at >= since AND _fb_tenant_allowed(t.tenant)
    UNION ALL
    -- Rows a reviewer stored as sent (pg_feedback.restore_mode) carry the created_by they were sent with: the
    -- restore's audit row names who really stored them.
    SELECT 'restored', f.id, f.content_hash, f.status, f.task_type, f.tenant, f.lesson, f.correction, f.source, a.at
      FROM feedback_audit a JOIN feedback_notes f ON f.id = a.note_id
     WHERE a.action = 'restore' AND a.detail ? 'created_by' AND a.actor = fb_notes_by.role AND a.at >= since
       AND NOT (f.created_by = fb_notes_by.role AND f.created_at >= since) AND _fb_tenant_allowed(f.tenant)
     ORDER BY 10, 2;
END $$;
COMMENT ON FUNCTION fb_notes_by(text, timestamptz) IS
    'Reviewer: what one role stored since a moment (default: ever), in time order: its notes (kind note, any '
    'status), its reports merged into other notes (kind merged: note_id is the note it was folded into) and the rows '
    'it stored as sent in restore mode under another name (kind restored, at: when). Only notes of the caller''s '
    'tenants and shared ones. fb_purge_by retires all of it.';

-- Retires everything one role stored since a moment: each note it created loses its text (status purged, the row,
-- id and history stay), and so does each report of it merged into another note. Reports other roles merged into
-- its notes keep their text: they are other reviewers' corrections. One audit row per note and per merge record,
-- and one for the whole call.
CREATE OR REPLACE FUNCTION fb_purge_by(role text, since timestamptz, reason text)
    RETURNS TABLE (kind text, note_id bigint, merged_hash text, old_status text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    why text := _fb_require_reason(reason, 'fb_purge_by');
    r record;
    notes integer := 0;
    merged integer := 0;
BEGIN
    IF role IS NULL OR _fb_normalize(role) = '' OR since IS NULL THEN
        RAISE EXCEPTION 'fb_purge_by needs a role and a moment, not %, %', coalesce(quote_literal(role), 'NULL'),
                        coalesce(since::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'List first with fb_notes_by(role, since); use ''-infinity'' for all time.';
    END IF;
    FOR r IN SELECT * FROM fb_notes_by(fb_purge_by.role, fb_purge_by.since) b WHERE b.status <> 'purged' OR b.kind = 'merged'
    LOOP
        IF r.kind IN ('note', 'restored') THEN
            PERFORM _fb_purge_note(r.note_id, why, 'purge_by', merges_of => fb_purge_by.role);
            notes := notes + 1;
        ELSIF r.lesson <> '[purged]' THEN
            PERFORM _fb_blank_merges(ARRAY(SELECT m.id FROM feedback_note_merges m
                                            WHERE m.merged_hash = r.merged_hash AND m.into_id = r.note_id
                                              AND m.merged_by = fb_purge_by.role));
            INSERT INTO feedback_audit (actor, action, note_id, content_hash, reason, detail)
            VALUES (_fb_actor(), 'purge_by_merged', r.note_id, r.merged_hash, why,
                    jsonb_build_object('merged_by', fb_purge_by.role));
            merged := merged + 1;
        ELSE
            CONTINUE;
        END IF;
        kind := r.kind;
        note_id := r.note_id;
        merged_hash := r.merged_hash;
        old_status := r.status;
        RETURN NEXT;
    END LOOP;
    INSERT INTO feedback_audit (actor, action, reason, detail)
    VALUES (_fb_actor(), 'purge_by', why,
            jsonb_build_object('role', fb_purge_by.role, 'since', fb_purge_by.since, 'notes', notes,
                               'merge_records', merged));
END $$;
COMMENT ON FUNCTION fb_purge_by(text, timestamptz, text) IS
    'Reviewer: retires everything one role stored since a moment (see fb_notes_by): its notes and the rows it '
    'restored are purged (text '
    'removed, row and history kept, never retrieved again) and its merged reports lose their text; other roles'' '
    'reports merged into its notes are kept. Returns what it retired; each item and the call are audited.';
