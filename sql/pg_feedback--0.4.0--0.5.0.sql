-- pg_feedback 0.4.0 -> 0.5.0: concurrency-safe dedup and re-submission counting (re-submissions counted under
-- the near-duplicate locks, in one lock order; REPEATABLE READ and SERIALIZABLE fail with a retryable
-- serialization_failure instead of storing a near-duplicate), and the bad-input fixes of 0.5.0.
\echo Use "ALTER EXTENSION pg_feedback UPDATE TO '0.5.0'" to load this file. \quit

CREATE UNLOGGED TABLE feedback_pending_reports (
    xid           xid8 NOT NULL DEFAULT pg_current_xact_id(),
    ord           bigint GENERATED ALWAYS AS IDENTITY,
    content_hash  text NOT NULL,
    tenant        text,
    wrong_answer  text NOT NULL,
    source        text
);

COMMENT ON TABLE feedback_pending_reports IS
    'Internal: re-submissions of stored notes seen by the insert trigger of the current statement, counted by its '
    'AFTER trigger (transaction-local rows, never visible to users).';

REVOKE ALL ON feedback_pending_reports FROM PUBLIC;

CREATE OR REPLACE FUNCTION _fb_resubmit(n feedback_notes) RETURNS feedback_notes
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    n := _fb_cleaned(n);
    IF NOT _fb_tenant_allowed(n.tenant) THEN
        RETURN n;   -- the insert goes on and is refused by its tenant check
    END IF;
    IF NOT EXISTS (SELECT 1 FROM feedback_notes f
                    WHERE f.content_hash = n.content_hash AND f.tenant IS NOT DISTINCT FROM n.tenant) THEN
        RETURN n;
    END IF;
    INSERT INTO feedback_pending_reports (content_hash, tenant, wrong_answer, source)
    VALUES (n.content_hash, n.tenant, coalesce(n.wrong_answer, ''), n.source);
    RETURN NULL;
END $$;

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
               (array_agg(p.source ORDER BY p.ord DESC) FILTER (WHERE _fb_normalize(p.source) <> ''))[1] AS source
          FROM feedback_pending_reports p
         WHERE p.xid = pg_current_xact_id()
         GROUP BY p.content_hash, p.tenant
         ORDER BY p.content_hash
    LOOP
        UPDATE feedback_notes f
           SET wrong_answer = CASE WHEN f.status = 'purged' THEN f.wrong_answer
                                   ELSE coalesce(rep.wrong_answer, f.wrong_answer) END,
               source = CASE WHEN f.status = 'purged' OR rep.source IS NULL THEN f.source
                             ELSE _fb_source(rep.source) END,
               updated_at = now(),
               report_count = f.report_count + rep.reports
         WHERE f.content_hash = rep.content_hash AND f.tenant IS NOT DISTINCT FROM rep.tenant
        RETURNING f.id, f.status INTO stored;
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

CREATE OR REPLACE FUNCTION _fb_lock_dedup(tenants text[], task_types text[]) RETURNS void
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
EXCEPTION WHEN serialization_failure THEN
    RAISE EXCEPTION 'could not check for near-duplicates: another transaction stored notes of the same task_type '
                    'after this transaction''s snapshot was taken'
        USING ERRCODE = 'serialization_failure',
              DETAIL = format('Transaction isolation is %s.', current_setting('transaction_isolation')),
              HINT = 'Retry the transaction. Under REPEATABLE READ and SERIALIZABLE a near-duplicate check cannot '
                     'see notes committed after the snapshot, so it fails rather than store a duplicate; under '
                     'READ COMMITTED concurrent ingests wait for each other instead.';
END $$;

CREATE OR REPLACE FUNCTION _fb_merge_near_duplicates(ids bigint[]) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    threshold double precision := current_setting('pg_feedback.dup_threshold')::double precision;
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
             SELECT coalesce(f.tenant, ''), f.task_type
               FROM feedback_pending_reports p
               JOIN feedback_notes f ON f.content_hash = p.content_hash AND f.tenant IS NOT DISTINCT FROM p.tenant
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
    -- finds the winner's row and counts a report on it. Rows go in in content-hash order, so two batches that
    -- share several new notes meet at the first of them and never deadlock at the content-hash index.
    FOR attempt IN 1..3 LOOP
        BEGIN
            WITH ins AS (
                INSERT INTO feedback_notes AS f (task_type, wrong_answer, correction, lesson, source, tenant)
                SELECT n.task_type, coalesce(n.wrong_answer, ''), n.correction, n.lesson, n.source, fb_ingest_batch.tenant
                  FROM unnest(notes) WITH ORDINALITY AS n(task_type, wrong_answer, correction, lesson, source, ord)
                 ORDER BY fb_content_hash(n.task_type, fb_redact(n.lesson), fb_redact(n.correction),
                                          fb_ingest_batch.tenant), ord
                RETURNING f.content_hash)
            SELECT coalesce(array_agg(ins.content_hash), '{}') INTO inserted FROM ins;
            EXIT;
        EXCEPTION WHEN unique_violation THEN
            -- Under REPEATABLE READ and SERIALIZABLE the winner's row stays invisible to this snapshot: running
            -- the INSERT again would fail the same way.
            IF current_setting('transaction_isolation') <> 'read committed' THEN
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


COMMENT ON FUNCTION _fb_resubmit(feedback_notes) IS
    'Internal: notes a re-submission of the stored note with the same content (counted by the statement''s AFTER '
    'trigger) and returns NULL; when no such note is stored, returns the note cleaned for storing.';

COMMENT ON FUNCTION _fb_count_reports() IS
    'Internal: counts the re-submissions noted by the current statement on their stored notes (AFTER INSERT).';

COMMENT ON FUNCTION _fb_lock_dedup(text[], text[]) IS
    'Internal: takes the near-duplicate locks of (tenant, task_type) pairs in sorted order until the end of the '
    'transaction (serialization_failure with a hint when a newer ingest is invisible to this snapshot).';

COMMENT ON FUNCTION _fb_merge_near_duplicates(bigint[]) IS
    'Internal: merges new notes into near-duplicate active notes of the same task_type and tenant '
    '(pg_feedback.dup_threshold, active model). Runs inside the insert trigger with the owner''s rights.';

COMMENT ON FUNCTION _fb_notes_after_insert() IS
    'Trigger: embeds the new rows of an INSERT or COPY in batched model runs in the same transaction, audits held '
    'notes and merges near-duplicates; moves the id sequence past restored rows.';

COMMENT ON FUNCTION fb_ingest_batch(fb_note_input[], text) IS
    'Stores many notes with one INSERT (embedded in batched model runs), all of one tenant (NULL: shared). Returns, '
    'in input order, each note''s id and action: inserted; pending when it waits for a reviewer (flagged by '
    'fb_screen, or pg_feedback.review = all); merged when it was folded into a near-duplicate (the id is then the '
    'existing note''s); for the same correction already stored (or repeated in the batch), a counted report: updated '
    'when that note is active, else its status (deprecated, pending, rejected, purged), which a report never changes.';

REVOKE ALL ON FUNCTION _fb_count_reports() FROM PUBLIC;
REVOKE ALL ON FUNCTION _fb_lock_dedup(text[],text[]) FROM PUBLIC;
