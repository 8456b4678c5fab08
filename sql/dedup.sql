-- pg_feedback: near-duplicates, re-submissions and revisions on ingest. A re-submitted note counts a report on the
-- stored one; a rewording of an active note of the same tenant and task_type is merged into it; a revision
-- supersedes it (pg_feedback.revisions), never folded into the lesson it corrects. Concurrent ingests into one
-- (tenant, task_type) are serialised by its near-duplicate lock.

CREATE TABLE feedback_dedup_locks (
    tenant     text NOT NULL,
    task_type  text NOT NULL,
    PRIMARY KEY (tenant, task_type)
);
COMMENT ON TABLE feedback_dedup_locks IS
    'Internal: one row per (tenant, task_type) whose row lock serialises near-duplicate checks of concurrent '
    'ingests (tenant  for shared notes). Holds no note data; rebuilt on demand.';

-- Re-submissions of stored notes, noted by the insert trigger of each row and counted by the statement's AFTER
-- trigger, which takes the near-duplicate locks first: every row lock on a stored note is then taken under the lock
-- of its (tenant, task_type), in one sorted order, so concurrent ingests never deadlock over counted reports.
-- Rows live only inside the inserting transaction (its AFTER trigger deletes them; a rollback removes them too).
CREATE UNLOGGED TABLE feedback_pending_reports (
    xid           xid8 NOT NULL DEFAULT pg_current_xact_id(),
    ord           bigint GENERATED ALWAYS AS IDENTITY,
    content_hash  text NOT NULL,
    tenant        text,
    task_type     text NOT NULL,
    wrong_answer  text NOT NULL,
    source        text,
    context       text NOT NULL DEFAULT '',
    lesson        text NOT NULL DEFAULT '',
    correction    text NOT NULL DEFAULT '',
    screened      boolean NOT NULL DEFAULT false
);
CREATE INDEX feedback_pending_reports_xid_idx ON feedback_pending_reports (xid);
COMMENT ON TABLE feedback_pending_reports IS
    'Internal: re-submissions of stored notes seen by the insert trigger of the current statement, counted by its '
    'AFTER trigger (transaction-local rows, never visible to users).';

-- SECURITY DEFINER because writers have no UPDATE right; it cleans the note itself, so calling it directly can do
-- no more than submitting. The note is cleaned once per row. Only the insert trigger may call it: a report noted
-- outside a statement would never be counted.
CREATE FUNCTION _fb_resubmit(n feedback_notes) RETURNS feedback_notes
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

-- In content-hash order, with the caller holding their near-duplicate locks. A re-submission by the role that
-- stored the note, screened clean, updates its wrong answer, source and context (the latest non-blank of each,
-- audited); from any other role it changes nothing on the note, which that role did not write. Either way a report
-- whose text differs from the stored note's in anything (a correction that differs only in whitespace or line
-- breaks has the same content hash) is kept whole in feedback_note_merges (kind resubmission): no reviewer's text is
-- lost. A purged note counts the report but takes no text: its text was removed on purpose. A report on a note that
-- is not active leaves its status alone (a reviewer decides) and says so in a NOTICE.
CREATE FUNCTION _fb_count_reports() RETURNS integer
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

-- The lock row is also written, not only locked: a REPEATABLE READ or SERIALIZABLE transaction whose snapshot
-- predates another one's ingest into the same (tenant, task_type) then fails to take it (serialization_failure,
-- retry) instead of checking against notes it cannot see. Only there is the failure caught to add a hint (a
-- subtransaction): READ COMMITTED ingests, the common case, open none.
CREATE FUNCTION _fb_lock_dedup(tenants text[], task_types text[]) RETURNS void
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

CREATE FUNCTION _fb_take_dedup_locks(tenants text[], task_types text[]) RETURNS void
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

-- The comparison is feedback_core::dedup's. Used by the ingest merge and fb_compare_notes.
CREATE FUNCTION _fb_compare_neighbours(olders text[], newer text, similarities double precision[],
                                       model text DEFAULT NULL) RETURNS jsonb[]
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    needed boolean[] := _fb_needs_residuals(olders, newer, similarities);
    texts text[] := '{}';
    slot integer[] := '{}';
    v vector[];
    residual double precision;
    out jsonb[] := '{}';
BEGIN
    -- Only the pairs the merge model could merge read the cosine of their residuals: embed those alone.
    FOR i IN 1..coalesce(cardinality(olders), 0) LOOP
        IF needed[i] THEN
            slot := slot || (cardinality(texts) + 1);
            texts := texts || _fb_residuals(olders[i], newer);
        ELSE
            slot := slot || 0;
        END IF;
    END LOOP;
    IF cardinality(texts) > 0 THEN
        v := fb_embed_batch(texts, false, model);
    END IF;
    FOR i IN 1..coalesce(cardinality(olders), 0) LOOP
        residual := CASE WHEN slot[i] > 0 THEN 1 - (v[slot[i]] <=> v[slot[i] + 1]) ELSE 0 END;
        out := array_append(out, _fb_compare_texts(olders[i], newer, similarities[i], residual));
    END LOOP;
    RETURN out;
END $$;
COMMENT ON FUNCTION _fb_compare_neighbours(text[], text, double precision[], text) IS
    'Internal: a newer lesson compared with each of several older ones whose cosines with it are given (the '
    'residual texts of the pairs the merge model reads embedded in one model run, none for the others).';

CREATE FUNCTION _fb_compare_lessons(older text, newer text, task_type text, similarity double precision DEFAULT NULL,
                                    model text DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    v vector[];
BEGIN
    IF similarity IS NULL THEN
        v := fb_embed_batch(ARRAY[fb_document_text(task_type, older), fb_document_text(task_type, newer)], false, model);
        similarity := 1 - (v[1] <=> v[2]);
    END IF;
    RETURN (_fb_compare_neighbours(ARRAY[older], newer, ARRAY[similarity], model))[1];
END $$;
COMMENT ON FUNCTION _fb_compare_lessons(text, text, text, double precision, text) IS
    'Internal: fb_compare_notes with the lessons'' cosine given (or computed by the model).';

CREATE FUNCTION fb_compare_notes(a text, b text, task_type text DEFAULT '') RETURNS jsonb
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN _fb_compare_lessons(a, b, task_type);
COMMENT ON FUNCTION fb_compare_notes(text, text, text) IS
    'What a newer lesson b is to an older lesson a (of the same task_type): verdict duplicate (a rewording: ingest '
    'merges it), revision (it reverses or changes a: it supersedes a, see pg_feedback.revisions) or distinct; '
    'similarity (cosine, active model), residual_similarity (cosine of what each says apart from what both '
    'share), overlap (share of content words aligned), kind (the change that made it a revision), differences '
    '(each change found: negation, no_longer, swapped_comparison, changed_number, changed_bound, changed_version, '
    'changed_identifier, scope_change, antonym, with the words on each side) and why.';

-- Never below the comparison model's own bound: under it the comparison can only answer distinct.
CREATE FUNCTION _fb_compare_bound() RETURNS double precision
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN greatest(_fb_setting('pg_feedback.compare_threshold')::double precision, _fb_dedup_neighbour());
COMMENT ON FUNCTION _fb_compare_bound() IS
    'Internal: the cosine at which a neighbour is compared with a note (pg_feedback.compare_threshold, at least the '
    'comparison model''s bound).';

CREATE FUNCTION _fb_near_neighbours(q vector(384), p_task_type text, p_tenant text, note_id bigint, model text,
                                    batch bigint[] DEFAULT NULL,
                                    OUT ids bigint[], OUT lessons text[], OUT similarities double precision[])
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT array_agg(c.id ORDER BY c.distance, c.id), array_agg(c.lesson ORDER BY c.distance, c.id),
               array_agg(1 - c.distance ORDER BY c.distance, c.id)
          FROM (SELECT c.id, c.distance, c.lesson
                  FROM _fb_candidates(q, p_task_type, 4, 'auto', p_tenant, true, model) c
                 WHERE c.id <> note_id AND 1 - c.distance >= _fb_compare_bound()
                   AND (c.id < note_id OR c.id <> ALL (batch))
                 ORDER BY c.distance, c.id
                 LIMIT 3) c;
    END;
COMMENT ON FUNCTION _fb_near_neighbours(vector, text, text, bigint, text, bigint[]) IS
    'Internal: the nearest active notes a note is compared with (older ones, or outside its batch), as arrays.';

-- Also run for just approved notes. The near-duplicate locks of the rows' (tenant, task_type) are taken first, in
-- sorted order, so under READ COMMITTED a second transaction adding a near-duplicate sees the first and compares
-- with it; under REPEATABLE READ and SERIALIZABLE it cannot see the first: taking the lock then fails with
-- serialization_failure (retry), never a silent duplicate.
CREATE FUNCTION _fb_merge_near_duplicates(ids bigint[]) RETURNS integer
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

CREATE FUNCTION _fb_supersede(older bigint, newer bigint) RETURNS boolean
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
