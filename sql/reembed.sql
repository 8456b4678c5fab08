-- pg_feedback: moving a database to another embedding model without mixing vector spaces.
--   CALL fb_reembed('all-MiniLM-L6-v2');          -- fills the standby slot in committed batches (resumable)
--   SELECT * FROM feedback_reembed_progress;       -- rows done / total, rate, ETA
--   SELECT * FROM fb_eval(model => 'all-MiniLM-L6-v2', record => false);   -- score it before switching
--   SELECT fb_switch_model('all-MiniLM-L6-v2');    -- refuses if recall@3 on feedback_golden drops (force => true)
-- Search keeps using the active model's slot until the switch; the switch itself only embeds the notes stored
-- since the re-embed and flips the active slot.

CREATE TABLE feedback_reembed_runs (
    id           bigserial PRIMARY KEY,
    model        text NOT NULL,
    slot         smallint NOT NULL CHECK (slot IN (1, 2)),
    pid          integer NOT NULL DEFAULT pg_backend_pid(),
    run_by       text NOT NULL DEFAULT session_user,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at  timestamptz,
    rows_total   bigint NOT NULL,
    rows_before  bigint NOT NULL,
    rows_done    bigint NOT NULL DEFAULT 0
);
SELECT pg_catalog.pg_extension_config_dump('feedback_reembed_runs', '');
SELECT pg_catalog.pg_extension_config_dump('feedback_reembed_runs_id_seq', '');
COMMENT ON TABLE feedback_reembed_runs IS
    'One row per CALL fb_reembed: the model, the slot it fills, the backend, and how far it got (committed with '
    'every batch). feedback_reembed_progress shows it with rate and ETA.';

-- SECURITY DEFINER: pg_stat_activity shows another role's state only to its members.
CREATE FUNCTION _fb_reembed_running(pid integer, started_at timestamptz) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a
                    WHERE a.pid = $1 AND a.state = 'active' AND a.query_start <= $2);
COMMENT ON FUNCTION _fb_reembed_running(integer, timestamptz) IS
    'Internal: the backend of a fb_reembed run is still executing the CALL that started it.';

CREATE VIEW feedback_reembed_progress AS
SELECT r.id, r.pid, r.model, r.slot,
       CASE WHEN r.finished_at IS NOT NULL THEN 'done'
            WHEN _fb_reembed_running(r.pid, r.started_at) THEN 'embedding'
            ELSE 'interrupted' END AS phase,
       r.rows_before + r.rows_done AS rows_done, r.rows_total,
       round(100.0 * (r.rows_before + r.rows_done) / nullif(r.rows_total, 0), 1) AS percent,
       round((r.rows_done / nullif(extract(epoch FROM r.updated_at - r.started_at), 0))::numeric, 1) AS rows_per_second,
       CASE WHEN r.finished_at IS NULL AND r.rows_done > 0 AND _fb_reembed_running(r.pid, r.started_at) THEN
            (r.updated_at - r.started_at) * greatest(r.rows_total - r.rows_before - r.rows_done, 0) / r.rows_done
       END AS eta,
       r.started_at, r.updated_at, r.finished_at, r.run_by
  FROM feedback_reembed_runs r;
COMMENT ON VIEW feedback_reembed_progress IS
    'Re-embedding runs in the style of pg_stat_progress_create_index: phase (embedding, done, or interrupted when '
    'it stopped, e.g. cancelled: CALL fb_reembed again to resume), notes done of the notes to embed, rate, and the '
    'time left while it runs.';

-- How many notes each model has vectors for, and how many the active model misses (invisible to search).
CREATE VIEW feedback_embedding_status AS
WITH per_model AS (
    SELECT v.model, count(DISTINCT n.id) AS notes
      FROM feedback_notes n
     CROSS JOIN LATERAL (VALUES (n.embedding_model, n.embedding IS NOT NULL),
                                (n.embedding_alt_model, n.embedding_alt IS NOT NULL)) AS v(model, present)
     WHERE n.status <> 'purged' AND v.present
     GROUP BY v.model
), total AS (
    SELECT count(*) AS notes FROM feedback_notes n WHERE n.status <> 'purged'
)
SELECT coalesce(s.model, p.model) AS model, s.slot,
       CASE WHEN s.active THEN 'active' WHEN s.slot IS NOT NULL THEN 'standby' ELSE 'unassigned' END AS state,
       coalesce(p.notes, 0) AS notes_embedded, t.notes - coalesce(p.notes, 0) AS notes_missing,
       s.assigned_at, s.assigned_by
  FROM feedback_embedding_slots s
  FULL JOIN per_model p ON p.model = s.model
 CROSS JOIN total t
 ORDER BY s.active IS NOT TRUE, s.slot, 1;
COMMENT ON VIEW feedback_embedding_status IS
    'Per embedding model: the slot that holds it (active or standby; unassigned: vectors restored or left from a '
    'model no slot holds), how many notes (not purged) it has vectors for, and how many it lacks. The active '
    'model''s notes_missing are invisible to retrieval until embedded (fb_reembed).';

-- Another model goes to the standby slot (assigned to it). The active model fills its own slot's gaps: notes
-- restored without a vector of it, or left from an update of an older version whose model is no longer installed.
CREATE FUNCTION _fb_reembed_start(model text, batch_size integer)
    RETURNS TABLE (run_id bigint, key text, slot smallint)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_variable
DECLARE
    k text := _fb_resolve_model(model);
    target smallint;
    total bigint;
    before bigint;
    run bigint;
BEGIN
    IF batch_size IS NULL OR batch_size NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'batch_size must be between 1 and 10000, not %', batch_size
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Notes embedded and committed per step, e.g. 256.';
    END IF;
    PERFORM _fb_pin_model();
    -- Slot assignments change one at a time (fb_switch_model takes the same lock).
    PERFORM 1 FROM feedback_embedding_slots s ORDER BY s.slot FOR UPDATE;
    IF k = _fb_active_model() THEN
        target := _fb_active_slot();
    ELSE
        target := 3 - _fb_active_slot();
        -- The standby slot now holds this model; vectors another model left there are replaced as the run goes.
        INSERT INTO feedback_embedding_slots AS s (slot, model, active, assigned_by)
        VALUES (target, k, false, _fb_actor())
        ON CONFLICT ON CONSTRAINT feedback_embedding_slots_pkey DO UPDATE
           SET model = excluded.model, assigned_at = now(), assigned_by = excluded.assigned_by
         WHERE s.model IS DISTINCT FROM excluded.model;
    END IF;
    SELECT count(*), count(*) FILTER (WHERE _fb_has_vector(n, target, k))
      INTO total, before
      FROM feedback_notes n WHERE n.status <> 'purged';
    INSERT INTO feedback_reembed_runs (model, slot, rows_total, rows_before, run_by)
    VALUES (k, target, total, before, _fb_actor())
    RETURNING id INTO run;
    RETURN QUERY SELECT run, k, target;
END $$;
COMMENT ON FUNCTION _fb_reembed_start(text, integer) IS
    'Internal: first step of fb_reembed (the model''s key, the slot it fills, a progress row).';

-- No row is locked while the model runs: a note edited meanwhile (its embedded text changed) is skipped here,
-- keeps the vector its edit gave it, and is picked up by a later run or the switch. Returns how many notes were
-- read, how many written, and the last id read.
CREATE FUNCTION _fb_reembed_step(run_id bigint, key text, slot smallint, after_id bigint, batch_size integer)
    RETURNS TABLE (done integer, written integer, last_id bigint)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_variable
DECLARE
    ids bigint[];
    docs text[];
    n integer;
BEGIN
    PERFORM 1 FROM feedback_embedding_slots s WHERE s.slot = slot AND s.model = key FOR SHARE;
    IF NOT FOUND AND key IS DISTINCT FROM _fb_active_model() THEN
        RAISE EXCEPTION 'slot % no longer holds model %', slot, key
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Another fb_reembed gave the slot to another model; run one re-embed at a time.';
    END IF;
    SELECT array_agg(b.id ORDER BY b.id), array_agg(fb_document_text(b.task_type, b.lesson) ORDER BY b.id)
      INTO ids, docs
      FROM (SELECT f.id, f.task_type, f.lesson FROM feedback_notes f
             WHERE f.id > after_id AND f.status <> 'purged'
               AND NOT _fb_has_vector(f, slot, key)
             ORDER BY f.id LIMIT batch_size) b;
    IF ids IS NULL THEN
        RETURN QUERY SELECT 0, 0, after_id;
        RETURN;
    END IF;
    n := _fb_store_vectors(ids, fb_embed_batch(docs, false, key), slot, key, docs);
    UPDATE feedback_reembed_runs r
       SET rows_done = r.rows_done + n, updated_at = clock_timestamp()
     WHERE r.id = run_id;
    RETURN QUERY SELECT cardinality(ids), n, ids[cardinality(ids)];
END $$;
COMMENT ON FUNCTION _fb_reembed_step(bigint, text, smallint, bigint, integer) IS
    'Internal: one committed batch of fb_reembed.';

CREATE FUNCTION _fb_reembed_finish(run_id bigint) RETURNS void
    LANGUAGE sql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        UPDATE feedback_reembed_runs SET finished_at = clock_timestamp(), updated_at = clock_timestamp()
         WHERE id = run_id;
    END;
COMMENT ON FUNCTION _fb_reembed_finish(bigint) IS 'Internal: marks a fb_reembed run done.';

-- A procedure that commits cannot carry a SET clause, so this one pins nothing itself: every call is
-- schema-qualified and the work happens in the helpers above, which pin search_path. Superuser only (no GRANT).
CREATE PROCEDURE fb_reembed(model text, batch_size integer DEFAULT 256)
    LANGUAGE plpgsql
    AS $$
DECLARE
    run record;
    step record;
    after_id bigint := 0;
BEGIN
    SELECT * INTO run FROM @extschema@._fb_reembed_start(model, batch_size);
    IF run.slot IS NULL THEN
        RETURN;
    END IF;
    COMMIT;
    LOOP
        SELECT * INTO step FROM @extschema@._fb_reembed_step(run.run_id, run.key, run.slot, after_id, batch_size);
        COMMIT;
        EXIT WHEN step.done OPERATOR(pg_catalog.=) 0;
        after_id := step.last_id;
        RAISE NOTICE '%', (SELECT pg_catalog.format('fb_reembed %s: %s of %s notes, %s/s', p.model, p.rows_done,
                                                    p.rows_total, p.rows_per_second)
                             FROM @extschema@.feedback_reembed_progress p WHERE p.id OPERATOR(pg_catalog.=) run.run_id);
    END LOOP;
    PERFORM @extschema@._fb_reembed_finish(run.run_id);
    COMMIT;
END $$;
COMMENT ON PROCEDURE fb_reembed(text, integer) IS
    'Superuser: embeds every note (not purged) with another model into the standby vector slot, batch_size notes '
    'per committed step, with a NOTICE per step and progress in feedback_reembed_progress. Search keeps using the '
    'active model meanwhile. Resumable and idempotent: a cancelled or crashed run keeps its committed batches, and '
    'CALLing it again embeds only the notes still missing. Call it outside a transaction block. Then score it '
    '(fb_eval(model => ...)) and switch (fb_switch_model).';

-- Makes the model in the standby slot the active one. Compares recall@3 on feedback_golden first (unless force
-- or there are no golden questions) and refuses a drop. Then, holding a lock that makes writers of feedback_notes
-- wait (readers go on), embeds the notes stored or edited since the re-embed and flips the active slot. The old
-- model's vectors stay in their slot, so switching back is as quick until the next fb_reembed replaces them.
CREATE FUNCTION fb_switch_model(model text, force boolean DEFAULT false)
    RETURNS TABLE (previous_model text, active_model text, caught_up integer, recall_before real, recall_after real,
                   writers_blocked interval)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_variable
DECLARE
    k text := _fb_resolve_model(model);
    old text;
    target smallint;
    before_recall real;
    after_recall real;
    missing bigint;
    locked_at timestamptz;
    caught integer := 0;
    after_id bigint := 0;
    step record;
BEGIN
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
        RAISE EXCEPTION 'only a superuser may switch the embedding model'
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Every note and query must move to the new vector space at once: ask a superuser.';
    END IF;
    IF k = _fb_active_model() THEN
        RAISE NOTICE 'model % is already the active one', k;
        RETURN QUERY SELECT k, k, 0, NULL::real, NULL::real, interval '0';
        RETURN;
    END IF;
    target := _fb_slot_of(k);
    SELECT count(*) INTO missing FROM feedback_notes n
     WHERE n.status <> 'purged' AND NOT _fb_has_vector(n, target, k);
    IF target IS NULL OR missing > 1000 THEN
        RAISE EXCEPTION 'model % is not re-embedded yet (% notes without its vectors)', k, coalesce(missing, -1)
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('CALL fb_reembed(%L) first, then switch.', model);
    END IF;
    IF EXISTS (SELECT 1 FROM feedback_golden) THEN
        SELECT e.recall_at_k INTO before_recall FROM fb_eval(3, false) e WHERE e.kind = '(all)';
        SELECT e.recall_at_k INTO after_recall FROM fb_eval(3, false, k) e WHERE e.kind = '(all)';
        IF after_recall < before_recall AND NOT coalesce(force, false) THEN
            RAISE EXCEPTION 'switching to % would lower recall@3 on feedback_golden from % to %', k,
                            round(before_recall::numeric, 3), round(after_recall::numeric, 3)
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Check the golden questions, or switch anyway with force => true.';
        END IF;
    END IF;
    -- From here writers wait (readers do not): the slots are locked as fb_reembed locks them, and checked again.
    LOCK TABLE feedback_notes IN SHARE ROW EXCLUSIVE MODE;
    locked_at := clock_timestamp();
    PERFORM 1 FROM feedback_embedding_slots s ORDER BY s.slot FOR UPDATE;
    old := _fb_active_model();
    IF _fb_slot_of(k) IS DISTINCT FROM target OR target = _fb_active_slot() THEN
        RAISE EXCEPTION 'the slots changed while fb_switch_model checked model %', k
            USING ERRCODE = 'serialization_failure', HINT = 'Run fb_switch_model again.';
    END IF;
    LOOP
        SELECT * INTO step FROM _fb_reembed_step(NULL, k, target, after_id, 1000);
        EXIT WHEN step.done = 0;
        caught := caught + step.written;
        after_id := step.last_id;
    END LOOP;
    UPDATE feedback_embedding_slots s SET active = false WHERE s.active;
    UPDATE feedback_embedding_slots s SET active = true, assigned_at = now(), assigned_by = _fb_actor()
     WHERE s.slot = target;
    INSERT INTO feedback_audit (actor, action, reason, detail)
    VALUES (_fb_actor(), 'switch_model', CASE WHEN force THEN 'forced' END,
            jsonb_build_object('from', old, 'to', k, 'caught_up', caught, 'recall_before', before_recall,
                               'recall_after', after_recall));
    RETURN QUERY SELECT old, k, caught, before_recall, after_recall, clock_timestamp() - locked_at;
END $$;
COMMENT ON FUNCTION fb_switch_model(text, boolean) IS
    'Superuser: makes a model that fb_reembed put in the standby slot the active one for retrieval, dedup and new '
    'notes. Refuses when recall@3 on feedback_golden would drop (force => true switches anyway). Writers wait '
    'while it embeds the notes stored since the re-embed (writers_blocked says how long); readers never wait.';
