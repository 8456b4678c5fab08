-- pg_feedback: the review queue and the lifecycle of a note (approve, reject, deprecate, restore, purge), each
-- change recorded in feedback_audit. These run with the extension owner's rights (SECURITY DEFINER): callers need
-- no UPDATE on any table, only EXECUTE, which feedback_reviewer holds.

CREATE FUNCTION _fb_release_revised(note_id bigint) RETURNS void
    LANGUAGE sql
    SET search_path = pg_catalog, @extschema@, pg_temp
    BEGIN ATOMIC
        UPDATE feedback_notes SET superseded_by = NULL, updated_at = now()
         WHERE superseded_by = _fb_release_revised.note_id AND status = 'active';
    END;
COMMENT ON FUNCTION _fb_release_revised(bigint) IS
    'Internal: a note leaving retrieval (deprecated, purged) releases the older notes it kept out as their live '
    'revision (pg_feedback.revisions = keep_both, fb_find_conflicts(record => true)).';

CREATE FUNCTION _fb_blank_merges(ids bigint[]) RETURNS integer
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

-- A note of a tenant the acting role is not a member of is treated as missing. Returns false when the note is in
-- another status.
CREATE FUNCTION _fb_set_status(note_id bigint, from_status text[], to_status text, action text, reason text)
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

CREATE FUNCTION _fb_require_reason(reason text, what text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    IF reason IS NULL OR _fb_normalize(reason) = '' THEN
        RAISE EXCEPTION '% needs a reason', what
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Say why, in a few words: it goes into feedback_audit.';
    END IF;
    RETURN fb_redact(_fb_normalize(reason));
END $$;
COMMENT ON FUNCTION _fb_require_reason(text, text) IS 'Internal: a non-blank reason, secrets redacted.';

CREATE FUNCTION fb_approve(note_id bigint, reason text DEFAULT NULL) RETURNS boolean
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
    IF (SELECT f.supersedes FROM feedback_notes f WHERE f.id = note_id) IS NOT NULL THEN
        -- A revision held for review: the note it revises leaves retrieval now.
        PERFORM _fb_supersede(f.supersedes, note_id) FROM feedback_notes f WHERE f.id = note_id;
    ELSE
        -- Live now: like any new active note it may be a near-duplicate of one already there.
        PERFORM _fb_merge_near_duplicates(ARRAY[note_id]);
    END IF;
    RETURN true;
END $$;
COMMENT ON FUNCTION fb_approve(bigint, text) IS
    'Reviewer: a pending (or rejected) note goes live (status active); a revision (supersedes) supersedes the note '
    'it revises, any other note merges into a near-duplicate if there is one. false when the note is in another '
    'status.';

CREATE FUNCTION fb_reject(note_id bigint, reason text) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN _fb_set_status(note_id, '{pending}', 'rejected', 'reject', _fb_require_reason(reason, 'fb_reject'));
COMMENT ON FUNCTION fb_reject(bigint, text) IS
    'Reviewer: retires a pending note (status rejected, kept for the record, never retrieved); a reason is required.';

CREATE FUNCTION fb_deprecate(note_id bigint, reason text DEFAULT NULL) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN _fb_set_status(note_id, '{active}', 'deprecated', 'deprecate', fb_redact(reason));
COMMENT ON FUNCTION fb_deprecate(bigint, text) IS
    'Reviewer: soft-deletes an active note (status deprecated); true if it was active. Notes are never deleted.';

CREATE FUNCTION fb_restore(note_id bigint, reason text DEFAULT NULL) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN _fb_set_status(note_id, '{deprecated,superseded}', 'active', 'restore', fb_redact(reason));
COMMENT ON FUNCTION fb_restore(bigint, text) IS
    'Reviewer: a deprecated or superseded note is active again (a superseded one no longer points at its revision); '
    'true if it was deprecated or superseded.';

-- A revision held for review that was a rewording after all: merged into the note it names, as the ingest merge
-- would have (the older note keeps its text and provenance, the report is recorded in feedback_note_merges).
CREATE FUNCTION fb_merge(note_id bigint, into_id bigint, reason text DEFAULT NULL) RETURNS boolean
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

CREATE FUNCTION fb_deprecate_stale(older_than interval, task_type text DEFAULT NULL) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_variable
DECLARE
    n integer := 0;
    note bigint;
BEGIN
    IF older_than IS NULL OR older_than <= interval '0' THEN
        RAISE EXCEPTION 'older_than must be a positive interval, not %', coalesce(older_than::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value', HINT = 'For example fb_deprecate_stale(interval ''180 days'').';
    END IF;
    FOR note IN
        SELECT f.id FROM feedback_notes f
         WHERE f.status = 'active' AND f.updated_at < now() - older_than
           AND (task_type IS NULL OR f.task_type = _fb_task_type(task_type))
           AND _fb_tenant_allowed(f.tenant)
         ORDER BY f.id
    LOOP
        IF _fb_set_status(note, '{active}', 'deprecated', 'deprecate_stale',
                          format('not reported for %s', older_than)) THEN
            n := n + 1;
        END IF;
    END LOOP;
    RETURN n;
END $$;
COMMENT ON FUNCTION fb_deprecate_stale(interval, text) IS
    'Reviewer (or a periodic job): deprecates active notes not reported again (updated_at) for older_than, of one '
    'task_type or all; returns how many. Each is audited.';

-- A note of a tenant the acting role is not a member of is treated as missing. Returns the merge records cleared.
CREATE FUNCTION _fb_purge_note(note_id bigint, why text, action text, merges_of text DEFAULT NULL)
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

CREATE FUNCTION fb_purge(note_id bigint, reason text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    -- The texts merged into this note were near-duplicates of it: they go too.
    PERFORM _fb_purge_note(note_id, _fb_require_reason(reason, 'fb_purge'), 'purge');
    RETURN true;
END $$;
COMMENT ON FUNCTION fb_purge(bigint, text) IS
    'Reviewer: removes a note''s text everywhere (the note, and the merge records of reports folded into it) for a '
    'leaked secret; the row stays with status purged so its id and history remain, and an audit row without the '
    'text is kept.';

CREATE FUNCTION fb_purge_merged(merged_hash text, reason text) RETURNS integer
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

-- A merged report back as its own note, for a merge that folded a correction into the lesson it corrects (earlier
-- versions merged by cosine alone): the report's text, source, context and reporter (created_by) as a new note of
-- the same task_type and tenant, held for a reviewer (pending), compared like any note when approved. The merge
-- record goes, the note it was folded into counts one report less; the audit keeps both ids.
CREATE FUNCTION fb_unmerge(merge_id bigint, reason text DEFAULT NULL) RETURNS bigint
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

-- Revisions already in the store: notes loaded with merging off, restored from a dump, or stored by a version that
-- merged by cosine alone. Each active note of the task_type is compared with its older active neighbours (same
-- tenant, cosine at least pg_feedback.compare_threshold and the comparison model's bound); every pair called a
-- revision is returned. record => true links each pair that is not linked yet as pg_feedback.revisions =
-- keep_both does (supersedes / superseded_by): feedback_conflicts lists it and retrieval takes the newer until a
-- reviewer settles it.
CREATE FUNCTION fb_find_conflicts(task_type text, record boolean DEFAULT false)
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

-- Everything one role stored since a moment, for a reviewer who suspects it (a leaked or compromised writer):
-- the notes it created (any status) and the reports of it that were merged into other notes. Only notes of the
-- acting role's tenants (and shared ones).
CREATE FUNCTION fb_notes_by(role text, since timestamptz DEFAULT '-infinity')
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
CREATE FUNCTION fb_purge_by(role text, since timestamptz, reason text)
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

CREATE VIEW feedback_review_queue WITH (security_barrier = true) AS
SELECT n.id, n.content_hash, n.task_type, n.tenant, n.lesson, n.correction, n.wrong_answer, n.screening AS findings,
       n.created_by AS reported_by, n.source, n.report_count, n.created_at, now() - n.created_at AS age,
       n.supersedes AS revises, o.lesson AS revises_lesson
  FROM feedback_notes n
  LEFT JOIN feedback_notes o ON o.id = n.supersedes
 WHERE n.status = 'pending'
   AND (n.tenant IS NULL OR n.tenant = ANY ((SELECT _fb_my_tenants())::text[]));
COMMENT ON VIEW feedback_review_queue IS
    'Notes waiting for a reviewer (status pending) of the tenants the current user belongs to, with fb_screen''s '
    'findings, who reported them and how long they have waited; revises: the active note a revision would '
    'supersede (revises_lesson its lesson). fb_approve or fb_reject settles each (fb_reject keeps the older note).';

CREATE VIEW feedback_conflicts WITH (security_barrier = true) AS
SELECT o.id AS older_id, n.id AS newer_id, o.task_type, o.tenant, o.lesson AS older_lesson, n.lesson AS newer_lesson,
       o.source AS older_source, n.source AS newer_source, o.created_by AS older_by, n.created_by AS newer_by,
       n.status AS newer_status, CASE WHEN n.status = 'active' THEN 'newer' ELSE 'older' END AS retrieved,
       n.created_at AS revised_at
  FROM feedback_notes n
  JOIN feedback_notes o ON o.id = n.supersedes
 WHERE o.status = 'active' AND n.status IN ('active', 'pending')
   AND (o.tenant IS NULL OR o.tenant = ANY ((SELECT _fb_my_tenants())::text[]));
COMMENT ON VIEW feedback_conflicts IS
    'Active notes with a newer note that revises them and is not settled: waiting for review (newer_status '
    'pending: the older is retrieved) or kept live beside it (pg_feedback.revisions = keep_both: only the newer is '
    'retrieved). fb_approve, fb_reject or fb_deprecate settles each.';
