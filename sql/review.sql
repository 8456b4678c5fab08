-- pg_feedback: the review queue and the lifecycle of a note (approve, reject, deprecate, restore, purge), each
-- change recorded in feedback_audit. These run with the extension owner's rights (SECURITY DEFINER): callers need
-- no UPDATE on any table, only EXECUTE, which feedback_reviewer holds.

-- Moves one note from one of the statuses in from_status to to_status, with an audit row. A note of a tenant the
-- acting role is not a member of is treated as missing. Returns false when the note is in another status.
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
    UPDATE feedback_notes SET status = to_status, updated_at = now() WHERE id = note_id;
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
    -- Live now: like any new active note it may be a near-duplicate of one already there.
    PERFORM _fb_merge_near_duplicates(ARRAY[note_id]);
    RETURN true;
END $$;
COMMENT ON FUNCTION fb_approve(bigint, text) IS
    'Reviewer: a pending (or rejected) note goes live (status active), and merges into a near-duplicate if there is '
    'one. false when the note is in another status.';

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
    RETURN _fb_set_status(note_id, '{deprecated}', 'active', 'restore', fb_redact(reason));
COMMENT ON FUNCTION fb_restore(bigint, text) IS 'Reviewer: a deprecated note is active again; true if it was deprecated.';

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

-- Removes one note's text everywhere for a reason: the note (status purged, the row and its id stay) and the merge
-- records folded into it, all of them (merges_of NULL) or only those one role submitted. Audited; returns the
-- merge records cleared. A note of a tenant the acting role is not a member of is treated as missing.
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
    UPDATE feedback_note_merges m SET lesson = '[purged]', correction = '[purged]', context = ''
     WHERE m.into_id = note_id AND (merges_of IS NULL OR m.merged_by = merges_of);
    GET DIAGNOSTICS merges = ROW_COUNT;
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
    UPDATE feedback_note_merges m SET lesson = '[purged]', correction = '[purged]', context = ''
      FROM feedback_notes t
     WHERE t.id = m.into_id AND _fb_tenant_allowed(t.tenant) AND m.merged_hash = fb_purge_merged.merged_hash;
    GET DIAGNOSTICS cleared = ROW_COUNT;
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
     ORDER BY 10, 2;
END $$;
COMMENT ON FUNCTION fb_notes_by(text, timestamptz) IS
    'Reviewer: what one role stored since a moment (default: ever), in time order: its notes (kind note, any '
    'status) and its reports merged into other notes (kind merged: note_id is the note it was folded into). Only '
    'notes of the caller''s tenants and shared ones. fb_purge_by retires all of it.';

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
        IF r.kind = 'note' THEN
            PERFORM _fb_purge_note(r.note_id, why, 'purge_by', merges_of => fb_purge_by.role);
            notes := notes + 1;
        ELSIF r.lesson <> '[purged]' THEN
            UPDATE feedback_note_merges m SET lesson = '[purged]', correction = '[purged]'
             WHERE m.merged_hash = r.merged_hash AND m.into_id = r.note_id AND m.merged_by = fb_purge_by.role;
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
    'Reviewer: retires everything one role stored since a moment (see fb_notes_by): its notes are purged (text '
    'removed, row and history kept, never retrieved again) and its merged reports lose their text; other roles'' '
    'reports merged into its notes are kept. Returns what it retired; each item and the call are audited.';

CREATE VIEW feedback_review_queue WITH (security_barrier = true) AS
SELECT n.id, n.content_hash, n.task_type, n.tenant, n.lesson, n.correction, n.wrong_answer, n.screening AS findings,
       n.created_by AS reported_by, n.source, n.report_count, n.created_at, now() - n.created_at AS age
  FROM feedback_notes n
 WHERE n.status = 'pending'
   AND (n.tenant IS NULL OR n.tenant = ANY ((SELECT _fb_my_tenants())::text[]));
COMMENT ON VIEW feedback_review_queue IS
    'Notes waiting for a reviewer (status pending) of the tenants the current user belongs to, with fb_screen''s '
    'findings, who reported them and how long they have waited. fb_approve or fb_reject settles each.';
