-- pg_feedback 0.1.0 -> 0.2.0: notes get an id that never changes (content_hash becomes a unique column),
-- merges, golden questions and audit rows point at it; embedding models are pinned by the sha256 of their weights
-- with two vector slots for re-embedding; restores keep rows as dumped. Every note, vector, merge, golden question
-- and audit row is kept: the notes table is rebuilt with ids numbered in creation order.
\echo Use "ALTER EXTENSION pg_feedback UPDATE TO '0.2.0'" to load this file. \quit

------------------------------------------------------------------------------------------------------------------
-- 1. What 0.2.0 defines anew: views and functions over the old columns, the triggers, the ingest type.
------------------------------------------------------------------------------------------------------------------

DROP VIEW feedback_active_notes, feedback_review_queue, fb_eval_history;
DROP TRIGGER feedback_notes_before_insert ON feedback_notes;
DROP TRIGGER feedback_notes_after_insert ON feedback_notes;
DROP TRIGGER feedback_notes_before_update ON feedback_notes;
DROP FUNCTION fb_build_prompt(text, text, text, integer);
DROP FUNCTION fb_retrieve(text, text, integer, integer, real, boolean);
DROP FUNCTION fb_find_duplicate(text, text);
DROP FUNCTION fb_eval(integer, boolean);
DROP FUNCTION fb_eval_ann(integer, integer);
DROP FUNCTION fb_ingest(text, text, text, text, text, text);
DROP FUNCTION fb_ingest_batch(fb_note_input[], text);
DROP TYPE fb_note_input;
DROP FUNCTION _fb_ingest_outcomes(text[]);
DROP FUNCTION fb_approve(text, text), fb_reject(text, text), fb_deprecate(text, text), fb_restore(text, text),
              fb_deprecate_stale(interval, text), fb_purge(text, text);
DROP FUNCTION _fb_set_status(text, text[], text, text, text), _fb_require_reason(text, text);
DROP FUNCTION _fb_merge_near_duplicates(text[]);
DROP FUNCTION _fb_candidates(vector, text, integer, text, text, boolean);
DROP FUNCTION _fb_notes_before_insert(), _fb_notes_after_insert(), _fb_notes_before_update();
DROP FUNCTION _fb_resubmit(feedback_notes), _fb_cleaned(feedback_notes);
DROP FUNCTION _fb_restoring();
DROP FUNCTION fb_embed(text), fb_embed_query(text), fb_embed_batch(text[], boolean);
DROP FUNCTION fb_embedding_model(), fb_models(), fb_note_id(text, text, text);
DROP FUNCTION _fb_embed(text, boolean), _fb_embed_batch(text[], boolean);
DROP FUNCTION _fb_clean_note(text, text, text, text, text);

------------------------------------------------------------------------------------------------------------------
-- 2. New functions of the library.
------------------------------------------------------------------------------------------------------------------

CREATE  FUNCTION "_fb_clean_note"(
	"task_type" TEXT, /* Option < & str > */
	"wrong_answer" TEXT, /* Option < & str > */
	"correction" TEXT, /* Option < & str > */
	"lesson" TEXT, /* Option < & str > */
	"tenant" TEXT /* Option < & str > */
) RETURNS TABLE (
	"task_type" TEXT,  /* String */
	"wrong_answer" TEXT,  /* String */
	"correction" TEXT,  /* String */
	"lesson" TEXT,  /* String */
	"content_hash" TEXT,  /* String */
	"redactions" TEXT[],  /* Vec < String > */
	"screening" jsonb,  /* JsonB */
	"tenant" TEXT  /* Option < String > */
)
STABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_clean_note_wrapper';

CREATE  FUNCTION "_fb_embed_with"(
	"model" TEXT, /* & str */
	"texts" TEXT[], /* Array < & str > */
	"query" bool /* bool */
) RETURNS SETOF real[] /* :: std :: option :: Option < Vec < f32 > > */
STRICT STABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_embed_with_wrapper';

CREATE  FUNCTION "_fb_model_key"(
	"name" TEXT /* & str */
) RETURNS TEXT /* String */
STRICT STABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_model_key_wrapper';

CREATE  FUNCTION "_fb_default_model"() RETURNS TEXT /* String */
STRICT STABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_default_model_wrapper';

CREATE  FUNCTION "_fb_installed_models"() RETURNS TABLE (
	"name" TEXT,  /* String */
	"kind" TEXT,  /* String */
	"dimensions" INT,  /* i32 */
	"pooling" TEXT,  /* Option < String > */
	"query_prefix" TEXT,  /* String */
	"max_tokens" INT,  /* i32 */
	"sha256" TEXT,  /* String */
	"key" TEXT,  /* Option < String > */
	"source" TEXT  /* String */
)
STRICT STABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_installed_models_wrapper';

CREATE  FUNCTION "fb_content_hash"(
	"task_type" TEXT, /* Option < & str > */
	"lesson" TEXT, /* Option < & str > */
	"correction" TEXT, /* Option < & str > */
	"tenant" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TEXT /* Option < String > */
IMMUTABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'fb_content_hash_wrapper';

CREATE  FUNCTION "_fb_normalize"(
	"text" TEXT /* & str */
) RETURNS TEXT /* String */
IMMUTABLE STRICT PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_normalize_wrapper';

CREATE  FUNCTION "_fb_on_conflict_do_nothing"(
	"relation" oid /* pg_sys :: Oid */
) RETURNS bool /* bool */
STRICT VOLATILE PARALLEL RESTRICTED
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_on_conflict_do_nothing_wrapper';

------------------------------------------------------------------------------------------------------------------
-- 3. Who is acting (actors.sql): a restore is recognised per row.
------------------------------------------------------------------------------------------------------------------

-- Whether an inserted row comes back from a dump or an export instead of being a new note, and whose trust it
-- gets. 'superuser': a superuser's row that carries its content_hash (a field only the server sets, which every
-- dump carries) or any superuser row with pg_feedback.restore_mode on; it is kept exactly as sent (pg_dump
-- restores are faithful with nothing to set). 'reviewer': a member of feedback_reviewer with restore_mode on; its
-- rows keep their text, vectors, status, timestamps and counts, but the server assigns the id and the content
-- hash, and each statement leaves an audit row. NULL: a new note, whatever the row carries.
CREATE FUNCTION _fb_restoring(content_hash text) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN CASE WHEN content_hash IS NOT NULL OR _fb_restore_mode() THEN   -- else a new note: no role lookup
               (SELECT CASE WHEN r.rolsuper THEN 'superuser'
                            WHEN _fb_restore_mode() AND pg_catalog.pg_has_role(r.oid, 'feedback_reviewer', 'MEMBER')
                            THEN 'reviewer' END
                  FROM pg_catalog.pg_roles r WHERE r.rolname = _fb_actor()) END;
COMMENT ON FUNCTION _fb_restoring(text) IS
    'Internal: whether an inserted row is restored and how far it is trusted: superuser (kept as sent: it carries '
    'its content_hash, or restore_mode), reviewer (restore_mode: server id and hash, audited) or NULL (a new note).';

------------------------------------------------------------------------------------------------------------------
-- 4. Model pinning and the embedding functions (models.sql, all new or replaced).
------------------------------------------------------------------------------------------------------------------

CREATE TABLE feedback_embedding_slots (
    slot         smallint PRIMARY KEY CHECK (slot IN (1, 2)),
    model        text NOT NULL,
    active       boolean NOT NULL DEFAULT false,
    assigned_at  timestamptz NOT NULL DEFAULT now(),
    assigned_by  text NOT NULL DEFAULT session_user
);
CREATE UNIQUE INDEX feedback_embedding_slots_one_active ON feedback_embedding_slots (active) WHERE active;
SELECT pg_catalog.pg_extension_config_dump('feedback_embedding_slots', '');
COMMENT ON TABLE feedback_embedding_slots IS
    'The model each vector slot of feedback_notes holds (slot 1: embedding, slot 2: embedding_alt) and which one '
    'is active. Empty until the first note: the database then pins pg_feedback.embedding_model in slot 1. Changed '
    'only by fb_reembed and fb_switch_model (superuser).';

-- The active slot and model, in one read. Before the first vector is stored: slot 1 and the key of the model
-- pg_feedback.embedding_model names (the call also loads the library, so settings are defined when callers read
-- them). A set-returning function, so a query that joins it reads the slots once, not per row.
CREATE FUNCTION _fb_active() RETURNS TABLE (slot smallint, model text)
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT coalesce(s.slot, 1::smallint), coalesce(s.model, _fb_default_model())
          FROM (SELECT) AS one LEFT JOIN feedback_embedding_slots s ON s.active;
    END;
CREATE FUNCTION _fb_active_slot() RETURNS smallint
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN coalesce((SELECT s.slot FROM feedback_embedding_slots s WHERE s.active), 1::smallint);
CREATE FUNCTION _fb_active_model() RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN (SELECT a.model FROM _fb_active() a);
-- The slot holding a model's vectors: the active slot for the active model, else the standby slot assigned to
-- it; NULL when no slot holds it.
CREATE FUNCTION _fb_slot_of(model text) RETURNS smallint
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN (SELECT CASE WHEN a.model = $1 THEN a.slot
                        ELSE (SELECT s.slot FROM feedback_embedding_slots s WHERE s.model = $1 AND NOT s.active) END
              FROM _fb_active() a);
-- A model as callers name it (a folder name, or a key name@sha256) turned into its key; NULL: the active model.
CREATE FUNCTION _fb_resolve_model(model text) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN CASE WHEN model IS NULL THEN _fb_active_model()
                WHEN strpos(model, '@') > 0 THEN model
                ELSE _fb_model_key(_fb_normalize(model)) END;
-- Pins the default model in slot 1 when the database has none yet (the first vector stored). SECURITY DEFINER:
-- a restoring reviewer embeds too; it can pin only what pg_feedback.embedding_model (superuser-set) names.
CREATE FUNCTION _fb_pin_model() RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        INSERT INTO feedback_embedding_slots (slot, model, active, assigned_by)
        SELECT 1, _fb_default_model(), true, _fb_actor()
         WHERE NOT EXISTS (SELECT 1 FROM feedback_embedding_slots WHERE active)
        ON CONFLICT DO NOTHING;
    END;

COMMENT ON FUNCTION _fb_active() IS 'Internal: the active vector slot and model key, read once.';
COMMENT ON FUNCTION _fb_active_slot() IS 'Internal: the vector slot retrieval reads (1: embedding, 2: embedding_alt).';
COMMENT ON FUNCTION _fb_active_model() IS 'Internal: the key (name@sha256) of the active embedding model.';
COMMENT ON FUNCTION _fb_slot_of(text) IS 'Internal: the slot holding a model''s vectors, NULL when none does.';
COMMENT ON FUNCTION _fb_resolve_model(text) IS
    'Internal: a model''s key from a folder name or a key; NULL means the active model.';
COMMENT ON FUNCTION _fb_pin_model() IS 'Internal: pins pg_feedback.embedding_model in slot 1 if no model is pinned yet.';

------------------------------------------------------------------------------------------------------------------
-- Embedding
------------------------------------------------------------------------------------------------------------------

CREATE FUNCTION fb_embed(text) RETURNS vector(384)
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN (SELECT e::vector(384) FROM _fb_embed_with(_fb_active_model(), ARRAY[$1], false) e);

CREATE FUNCTION fb_embed_query(text) RETURNS vector(384)
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN (SELECT e::vector(384) FROM _fb_embed_with(_fb_active_model(), ARRAY[$1], true) e);

CREATE FUNCTION fb_embed_batch(texts text[], query boolean DEFAULT false, model text DEFAULT NULL)
    RETURNS vector[]
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT CASE WHEN texts IS NOT NULL AND query IS NOT NULL
                    THEN coalesce(array_agg(e::vector(384) ORDER BY n), '{}') END
          FROM _fb_embed_with(_fb_resolve_model(model), texts, query) WITH ORDINALITY AS t(e, n);
    END;

CREATE FUNCTION fb_embedding_model() RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN _fb_active_model();

CREATE FUNCTION fb_models()
    RETURNS TABLE (name text, kind text, dimensions integer, pooling text, query_prefix text, max_tokens integer,
                   sha256 text, key text, slot smallint, active boolean, source text)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT m.name, m.kind, m.dimensions, m.pooling, m.query_prefix, m.max_tokens, m.sha256, m.key,
               _fb_slot_of(m.key), m.key IS NOT DISTINCT FROM _fb_active_model(), m.source
          FROM _fb_installed_models() m
         ORDER BY m.name;
    END;

COMMENT ON FUNCTION fb_embed(text) IS
    'Embedding of a document (a note) with the database''s active model (fb_embedding_model()): 384-wide, '
    'L2-normalised. Inputs longer than the model''s token limit are truncated. STABLE: it depends on the model.';
COMMENT ON FUNCTION fb_embed_query(text) IS
    'Embedding of a search query: like fb_embed, with the model''s query prefix (bge-small-en-v1.5: '
    '"Represent this sentence for searching relevant passages: "), through the backend''s query cache.';
COMMENT ON FUNCTION fb_embed_batch(text[], boolean, text) IS
    'Embeddings of many texts in batched model runs (pg_feedback.embed_batch_size texts per run), in input order; '
    'NULL for a NULL element. query => true applies the query prefix; model => a folder name or key (default: the '
    'active model).';
COMMENT ON FUNCTION _fb_embed_with(text, text[], boolean) IS
    'Internal: embeddings with a pinned model key (name@sha256) as rows of real[]; refuses when the installed files '
    'are not that model''s. Use fb_embed, fb_embed_query or fb_embed_batch.';
COMMENT ON FUNCTION _fb_model_key(text) IS 'Internal: the key name@sha256 of an installed embedding model.';
COMMENT ON FUNCTION _fb_default_model() IS
    'Internal: the key of the model pg_feedback.embedding_model names, pinned by a database''s first note.';
COMMENT ON FUNCTION _fb_installed_models() IS 'Internal: model folders and their manifests; see fb_models.';
COMMENT ON FUNCTION fb_embedding_model() IS
    'The database''s active embedding model as its key: folder name @ sha256 of its weights. Notes record the key of '
    'the model that embedded them; only vectors of this key are searched.';
COMMENT ON FUNCTION fb_count_tokens(text) IS
    'Tokens the tokenizer of pg_feedback.embedding_model makes of a text (special tokens excluded, no truncation).';
COMMENT ON FUNCTION fb_model_stats() IS
    'This backend''s model activity since it started: model runs, texts embedded, pairs scored, loaded sessions.';
COMMENT ON FUNCTION fb_models() IS
    'Models installed in pg_feedback.model_dir, as their manifests describe them: the sha256 of the weights, the '
    'key an embedding model is pinned by, the vector slot holding its vectors in this database and whether it is '
    'the active one. feedback_embedding_status counts the notes of each.';
COMMENT ON FUNCTION fb_rerank(text, text[]) IS
    'Cross-encoder (pg_feedback.rerank_model) relevance of each passage to the query, in input order, from one '
    'batched run. Scores are raw logits: higher is more relevant, not probabilities. NULL passage, NULL score.';
COMMENT ON FUNCTION fb_content_hash(text, text, text, text) IS
    'A note''s content hash: sha256 hex of its task_type (whitespace trimmed and collapsed, lower case), lesson and '
    'correction (whitespace trimmed and collapsed), joined by U+001F, then the tenant when given. A re-submission '
    'with the same hash counts a report on the stored note. Stored notes are hashed after redaction: pass the '
    'redacted text (fb_redact) of a note that held a secret.';
COMMENT ON FUNCTION _fb_normalize(text) IS
    'Internal: Unicode whitespace and control characters trimmed, inner runs collapsed to one space.';
COMMENT ON FUNCTION fb_document_text(text, text) IS 'The text a note is embedded from: "task_type: lesson".';

------------------------------------------------------------------------------------------------------------------
-- 5. The notes table, rebuilt: a bigint id that never changes, the content hash as a unique column, a second
--    vector slot. Ids follow creation order. The old table goes once everything points at the new one.
------------------------------------------------------------------------------------------------------------------

-- Foreign keys of other tables on the text id cannot follow it: refuse, and change nothing, rather than drop them.
DO $$
DECLARE
    outside text;
BEGIN
    SELECT string_agg(format('%s on %s', c.conname, c.conrelid::regclass), ', ') INTO outside
      FROM pg_catalog.pg_constraint c
     WHERE c.confrelid = '@extschema@.feedback_notes'::regclass
       AND c.conrelid <> '@extschema@.feedback_note_merges'::regclass;
    IF outside IS NOT NULL THEN
        RAISE EXCEPTION 'foreign keys outside pg_feedback reference feedback_notes: %', outside
            USING ERRCODE = 'dependent_objects_still_exist',
                  HINT = 'In 0.2.0 a note''s id is a bigint and the old text id is content_hash: drop these '
                         'constraints, update, then point them at feedback_notes.id or content_hash.';
    END IF;
END $$;

ALTER TABLE feedback_notes RENAME TO feedback_notes_0_1_0;
ALTER TABLE feedback_notes_0_1_0 DROP CONSTRAINT feedback_notes_pkey CASCADE;   -- and the merges' foreign key
DROP INDEX feedback_notes_embedding_idx, feedback_notes_task_type_idx, feedback_notes_pending_idx;
-- Its constraints go too, so that the new table's get the same names as in a fresh install.
DO $$
DECLARE
    c text;
BEGIN
    FOR c IN SELECT conname FROM pg_catalog.pg_constraint
              WHERE conrelid = '@extschema@.feedback_notes_0_1_0'::regclass AND contype IN ('c', 'n') LOOP
        EXECUTE format('ALTER TABLE @extschema@.feedback_notes_0_1_0 DROP CONSTRAINT %I', c);
    END LOOP;
END $$;

CREATE SEQUENCE feedback_notes_id_seq;

CREATE TABLE feedback_notes (
    id                   bigint PRIMARY KEY,
    content_hash         text NOT NULL,
    task_type            text NOT NULL,
    wrong_answer         text NOT NULL DEFAULT '',
    correction           text NOT NULL,
    lesson               text NOT NULL,
    embedding            vector(384),
    embedding_model      text,
    embedding_alt        vector(384),
    embedding_alt_model  text,
    source               text NOT NULL DEFAULT 'review_ui',
    created_by           text NOT NULL DEFAULT session_user,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    report_count         integer NOT NULL DEFAULT 1 CHECK (report_count >= 1),
    status               text NOT NULL DEFAULT 'active'
                         CHECK (status IN ('active', 'deprecated', 'pending', 'rejected', 'purged')),
    tenant               text,
    screening            jsonb NOT NULL DEFAULT '[]',
    redactions           text[] NOT NULL DEFAULT '{}',
    CONSTRAINT feedback_notes_content_hash_key UNIQUE (content_hash)
);
ALTER SEQUENCE feedback_notes_id_seq OWNED BY feedback_notes.id;

-- Vectors keep their model, now named by its key (the installed model of that name: 0.1.0 recorded no
-- checksum). A model that is no longer installed keeps its bare name: its vectors stay, invisible to search,
-- until fb_reembed.
-- Privileges granted on the old table (beyond pg_feedback's own roles, granted again below) carry over.
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN SELECT a.privilege_type, a.grantee::regrole::text AS grantee, a.is_grantable
               FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
              WHERE c.oid = '@extschema@.feedback_notes_0_1_0'::regclass AND a.grantee <> 0
                AND a.grantee <> c.relowner LOOP
        EXECUTE format('GRANT %s ON @extschema@.feedback_notes TO %s%s', g.privilege_type, g.grantee,
                       CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END $$;

CREATE FUNCTION _fb_upgrade_model_key(name text) RETURNS text
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $fn$
BEGIN
    RETURN _fb_model_key(name);
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'embedding model "%" is not installed: its notes keep their vectors but are not searched until '
                  're-embedded', name
        USING HINT = 'CALL fb_reembed(<an installed model>), then SELECT fb_switch_model(...).';
    RETURN name;
END $fn$;

INSERT INTO feedback_notes (id, content_hash, task_type, wrong_answer, correction, lesson, embedding, embedding_model,
                            source, created_by, created_at, updated_at, report_count, status, tenant, screening,
                            redactions)
SELECT row_number() OVER (ORDER BY o.created_at, o.id), o.id, o.task_type, o.wrong_answer, o.correction, o.lesson,
       o.embedding, k.key, o.source, o.created_by, o.created_at, o.updated_at, o.report_count, o.status, o.tenant,
       o.screening, o.redactions
  FROM feedback_notes_0_1_0 o
  LEFT JOIN (SELECT m.name, _fb_upgrade_model_key(m.name) AS key
               FROM (SELECT DISTINCT n.embedding_model AS name FROM feedback_notes_0_1_0 n
                      WHERE n.embedding_model IS NOT NULL) m) k ON k.name = o.embedding_model;
DROP FUNCTION _fb_upgrade_model_key(text);
SELECT setval('feedback_notes_id_seq', coalesce(max(id), 0) + 1, false) FROM feedback_notes;

-- The HNSW index is built once over every note. With its graph in memory that takes about a minute for 100,000
-- notes; spilled to disk (the default 64MB holds about 28,000) several times longer. So this script raises
-- maintenance_work_mem to what the notes need (about 3kB each), up to 1GB and never below the session's value,
-- for this script only.
SELECT pg_catalog.set_config('maintenance_work_mem',
           greatest(s.setting::bigint, least(3 * (SELECT count(*) FROM feedback_notes), 1048576))::text || 'kB', true)
  FROM pg_catalog.pg_settings s WHERE s.name = 'maintenance_work_mem';

CREATE INDEX feedback_notes_embedding_idx ON feedback_notes USING hnsw (embedding vector_cosine_ops);
CREATE INDEX feedback_notes_embedding_alt_idx ON feedback_notes USING hnsw (embedding_alt vector_cosine_ops);
CREATE INDEX feedback_notes_task_type_idx ON feedback_notes (task_type, status);
CREATE INDEX feedback_notes_pending_idx ON feedback_notes (created_at) WHERE status = 'pending';

SELECT pg_catalog.pg_extension_config_dump('feedback_notes', '');
SELECT pg_catalog.pg_extension_config_dump('feedback_notes_id_seq', '');

COMMENT ON TABLE feedback_notes IS
    'One reviewer correction per row. id never changes; content_hash (fb_content_hash) makes submitting the same '
    'correction again count a report on the stored row. Secrets are redacted and instructions screened before a '
    'note is stored; flagged notes wait as pending for a reviewer. Notes are never deleted by the API: fb_deprecate '
    'sets status = ''deprecated''. Readers see active notes through feedback_active_notes.';
COMMENT ON COLUMN feedback_notes.id IS 'The note''s identity: set by the server, never changed (also when the note is edited).';
COMMENT ON COLUMN feedback_notes.content_hash IS
    'fb_content_hash(task_type, lesson, correction, tenant) of the stored text; set by the server, follows edits.';
COMMENT ON COLUMN feedback_notes.task_type IS 'Kind of task the lesson applies to (lower case), e.g. sql_injection_scan.';
COMMENT ON COLUMN feedback_notes.wrong_answer IS 'What the model answered (latest report), secrets redacted.';
COMMENT ON COLUMN feedback_notes.correction IS 'What the reviewer said the right answer is, secrets redacted.';
COMMENT ON COLUMN feedback_notes.lesson IS 'The one-line lesson fed back into prompts, secrets redacted.';
COMMENT ON COLUMN feedback_notes.embedding IS
    'Vector slot 1: embedding of "task_type: lesson" by embedding_model, computed by the server.';
COMMENT ON COLUMN feedback_notes.embedding_model IS 'Key (name@sha256 of its weights) of the model that computed embedding.';
COMMENT ON COLUMN feedback_notes.embedding_alt IS
    'Vector slot 2: the same text embedded by embedding_alt_model (fb_reembed fills the slot that is not active).';
COMMENT ON COLUMN feedback_notes.embedding_alt_model IS 'Key of the model that computed embedding_alt.';
COMMENT ON COLUMN feedback_notes.source IS 'Where the latest report came from (provenance), e.g. review_ui, import.';
COMMENT ON COLUMN feedback_notes.created_by IS 'Role that first reported the note (set by the server).';
COMMENT ON COLUMN feedback_notes.created_at IS 'When the note was first stored (set by the server).';
COMMENT ON COLUMN feedback_notes.updated_at IS 'When the note was last reported, edited or changed status (set by the server).';
COMMENT ON COLUMN feedback_notes.report_count IS 'How many times the note was reported (counted by the server).';
COMMENT ON COLUMN feedback_notes.status IS
    'active (retrieved); pending (waits for fb_approve or fb_reject); deprecated (soft-deleted, fb_restore brings it '
    'back); rejected (a reviewer refused it); purged (its text was removed by fb_purge). Set by the server.';
COMMENT ON COLUMN feedback_notes.tenant IS
    'The role whose members may retrieve the note; NULL: shared with every reader. Near-duplicates never merge '
    'across tenants.';
COMMENT ON COLUMN feedback_notes.screening IS 'fb_screen findings on the lesson and correction (field, rule, family, severity, span).';
COMMENT ON COLUMN feedback_notes.redactions IS 'Kinds of secrets fb_redact replaced when the note was stored.';

-- The database pins the model most of its notes were embedded with (0.1.0 had no pin: each session used its
-- pg_feedback.embedding_model), else the default; notes of another model show in feedback_embedding_status and
-- CALL fb_reembed(<the pinned model>) embeds them.
INSERT INTO feedback_embedding_slots (slot, model, active, assigned_by)
SELECT 1, coalesce((SELECT n.embedding_model FROM feedback_notes n WHERE strpos(n.embedding_model, '@') > 0
                     GROUP BY n.embedding_model ORDER BY count(*) DESC, n.embedding_model LIMIT 1),
                   _fb_default_model()), true, session_user
 WHERE EXISTS (SELECT 1 FROM feedback_notes);

-- Merges point at the note's id; the merged report keeps its content hash.
ALTER TABLE feedback_note_merges RENAME COLUMN merged_id TO merged_hash;
ALTER TABLE feedback_note_merges RENAME CONSTRAINT feedback_note_merges_merged_id_not_null
    TO feedback_note_merges_merged_hash_not_null;
ALTER INDEX feedback_note_merges_merged_id_idx RENAME TO feedback_note_merges_merged_hash_idx;
ALTER TABLE feedback_note_merges RENAME COLUMN into_id TO into_hash_0_1_0;
ALTER TABLE feedback_note_merges ADD COLUMN into_id bigint REFERENCES feedback_notes (id);
UPDATE feedback_note_merges m SET into_id = n.id FROM feedback_notes n WHERE n.content_hash = m.into_hash_0_1_0;
ALTER TABLE feedback_note_merges DROP COLUMN into_hash_0_1_0;
ALTER TABLE feedback_note_merges ALTER COLUMN into_id SET NOT NULL;
CREATE INDEX feedback_note_merges_into_id_idx ON feedback_note_merges (into_id);

-- Audit rows name the note by id, and keep the content hash it had.
ALTER TABLE feedback_audit DISABLE TRIGGER feedback_audit_no_update;
ALTER TABLE feedback_audit RENAME COLUMN note_id TO content_hash;
DROP INDEX feedback_audit_note_id_idx;
ALTER TABLE feedback_audit ADD COLUMN note_id bigint;
UPDATE feedback_audit a SET note_id = n.id FROM feedback_notes n WHERE n.content_hash = a.content_hash;
ALTER TABLE feedback_audit ENABLE TRIGGER feedback_audit_no_update;
CREATE INDEX feedback_audit_note_id_idx ON feedback_audit (note_id);

-- Golden questions point at the expected note's id. One whose note is gone would silently never match: the
-- update refuses instead (a merged-away note resolves to the note it was merged into).
ALTER TABLE feedback_golden RENAME COLUMN expected_id TO expected_hash_0_1_0;
ALTER TABLE feedback_golden ADD COLUMN expected_id bigint REFERENCES feedback_notes (id);
UPDATE feedback_golden g
   SET expected_id = coalesce((SELECT n.id FROM feedback_notes n WHERE n.content_hash = g.expected_hash_0_1_0),
                              (SELECT m.into_id FROM feedback_note_merges m WHERE m.merged_hash = g.expected_hash_0_1_0
                                ORDER BY m.merged_at DESC LIMIT 1))
 WHERE g.expected_hash_0_1_0 IS NOT NULL;
DO $$
DECLARE
    lost bigint;
BEGIN
    SELECT count(*) INTO lost FROM @extschema@.feedback_golden
     WHERE expected_hash_0_1_0 IS NOT NULL AND expected_id IS NULL;
    IF lost > 0 THEN
        RAISE EXCEPTION '% golden questions expect a note that does not exist', lost
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'Fix or delete them (feedback_golden.expected_id names no feedback_notes.id), then update.';
    END IF;
END $$;
ALTER TABLE feedback_golden DROP COLUMN expected_hash_0_1_0;

-- Out of the extension first: that also takes it off the list of tables pg_dump dumps (extconfig).
ALTER EXTENSION pg_feedback DROP TABLE feedback_notes_0_1_0;
DROP TABLE feedback_notes_0_1_0;

------------------------------------------------------------------------------------------------------------------
-- 6. The write path and ingest API (notes.sql).
------------------------------------------------------------------------------------------------------------------

-- The next note id. SECURITY DEFINER: writers need no right on the sequence, and cannot take ids themselves.
CREATE FUNCTION _fb_next_note_id() RETURNS bigint
    LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN nextval('feedback_notes_id_seq');
COMMENT ON FUNCTION _fb_next_note_id() IS 'Internal: the id of a new note (feedback_notes_id_seq).';

-- A note's vector in a slot, and whether the slot holds a vector computed by a model.
CREATE FUNCTION _fb_vector(n feedback_notes, slot smallint) RETURNS vector(384)
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN CASE slot WHEN 1 THEN n.embedding ELSE n.embedding_alt END;
CREATE FUNCTION _fb_has_vector(n feedback_notes, slot smallint, model text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN CASE slot WHEN 1 THEN n.embedding IS NOT NULL AND n.embedding_model IS NOT DISTINCT FROM model
                     ELSE n.embedding_alt IS NOT NULL AND n.embedding_alt_model IS NOT DISTINCT FROM model END;
COMMENT ON FUNCTION _fb_vector(feedback_notes, smallint) IS 'Internal: a note''s vector in a slot.';
COMMENT ON FUNCTION _fb_has_vector(feedback_notes, smallint, text) IS
    'Internal: whether a note''s slot holds a vector computed by a model.';

-- A note with a vector (computed by model) in a slot.
CREATE FUNCTION _fb_with_vector(n feedback_notes, slot smallint, vec vector, model text) RETURNS feedback_notes
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    IF slot = 1 THEN
        n.embedding := vec;
        n.embedding_model := model;
    ELSE
        n.embedding_alt := vec;
        n.embedding_alt_model := model;
    END IF;
    RETURN n;
END $$;
COMMENT ON FUNCTION _fb_with_vector(feedback_notes, smallint, vector, text) IS
    'Internal: a note with a vector of a model in a slot.';

-- Stores vectors of model (one per id) in a slot. With docs (the texts they were made from), a note whose
-- embedded text changed since is skipped: it keeps the vector its edit gave it. Returns how many were stored.
CREATE FUNCTION _fb_store_vectors(ids bigint[], vectors vector[], slot smallint, model text, docs text[] DEFAULT NULL)
    RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_variable
DECLARE
    n integer;
BEGIN
    UPDATE feedback_notes f
       SET embedding = CASE WHEN slot = 1 THEN e.v ELSE f.embedding END,
           embedding_model = CASE WHEN slot = 1 THEN model ELSE f.embedding_model END,
           embedding_alt = CASE WHEN slot = 2 THEN e.v ELSE f.embedding_alt END,
           embedding_alt_model = CASE WHEN slot = 2 THEN model ELSE f.embedding_alt_model END
      FROM unnest(ids, vectors, coalesce(docs, array_fill(NULL::text, ARRAY[cardinality(ids)]))) AS e(id, v, doc)
     WHERE f.id = e.id AND e.v IS NOT NULL AND f.status <> 'purged'
       AND (e.doc IS NULL OR fb_document_text(f.task_type, f.lesson) = e.doc);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;
COMMENT ON FUNCTION _fb_store_vectors(bigint[], vector[], smallint, text, text[]) IS
    'Internal: writes vectors of a model into a slot (skipping notes whose embedded text changed since docs).';

-- The active slot and model for a write that stores vectors: pins the default model if none is pinned yet, and
-- holds a share lock on the active slot's row until the transaction ends, so fb_switch_model cannot flip the slot
-- between this read and the write (a writer whose snapshot predates a switch gets a serialization error instead
-- of storing a vector of the old model). SECURITY DEFINER: writers have no UPDATE right on the slots.
CREATE FUNCTION _fb_lock_active_model() RETURNS TABLE (slot smallint, model text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    PERFORM _fb_pin_model();
    RETURN QUERY SELECT s.slot, s.model FROM feedback_embedding_slots s WHERE s.active FOR SHARE;
END $$;
COMMENT ON FUNCTION _fb_lock_active_model() IS
    'Internal: the active slot and model, pinned if need be and share-locked until the end of the transaction.';

-- What readers see of the notes: active notes of their tenants and shared ones, with the vector of the active
-- model. The view reads the table with its owner's rights and filters by the caller, so a reader needs no right
-- on feedback_notes itself; security_barrier keeps a caller's functions from seeing rows the filter drops.
-- (Row-level security on the table would make Postgres refuse COPY FROM for every writer.)
CREATE VIEW feedback_active_notes WITH (security_barrier = true) AS
SELECT n.id, n.task_type, n.tenant, n.lesson, n.correction,
       -- Spelled out rather than _fb_has_vector/_fb_vector: a function with a SET clause is never inlined, and
       -- two calls per row made the view 4x slower (96 instead of 22 ms over 10,000 notes).
       CASE WHEN a.slot = 1 AND n.embedding_model = a.model THEN n.embedding
            WHEN a.slot = 2 AND n.embedding_alt_model = a.model THEN n.embedding_alt END AS embedding,
       a.model AS embedding_model, n.source, n.created_at, n.updated_at, n.report_count, n.content_hash
  FROM feedback_notes n
 CROSS JOIN _fb_active() a
 WHERE n.status = 'active'
   AND (n.tenant IS NULL OR n.tenant = ANY ((SELECT _fb_my_tenants())::text[]));
COMMENT ON VIEW feedback_active_notes IS
    'Active notes visible to the current user: shared ones (tenant NULL) and those of tenant roles it is a member '
    'of, with their vector of the active model (NULL until re-embedded when another model computed it). Retrieval '
    'reads the same notes, so it never returns another tenant''s note nor a pending one.';

-- Nearest active notes of one task_type among those the acting role may see (shared ones and its tenants'), with
-- what retrieval shows of them, compared only with vectors of one model (default: the active one) in the slot that
-- holds it. Exact when the task_type holds at most pg_feedback.exact_scan_limit such notes (perfect recall, cheap
-- for small sets); otherwise the slot's HNSW index with pgvector's iterative scan, so a selective filter
-- (task_type, tenant) still yields k candidates. scoped => true restricts to notes of exactly p_tenant (NULL:
-- shared notes), for near-duplicate merging. SECURITY DEFINER: readers have no right on feedback_notes, and a view
-- over it could not use the HNSW index for ordering (a security-barrier view is never flattened). The slot's
-- column names come from a fixed list, so the dynamic SQL takes no caller text.
CREATE FUNCTION _fb_candidates(q vector(384), p_task_type text, k integer, mode text DEFAULT 'auto',
                               p_tenant text DEFAULT NULL, scoped boolean DEFAULT false, model text DEFAULT NULL)
    RETURNS TABLE (id bigint, distance double precision, lesson text, correction text, created_at timestamptz)
    LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    SET hnsw.iterative_scan = 'relaxed_order'
    SET hnsw.ef_search = 400
    AS $$
DECLARE
    exact_limit integer := current_setting('pg_feedback.exact_scan_limit')::integer;
    tenants text[] := CASE WHEN scoped THEN ARRAY[p_tenant] ELSE _fb_my_tenants() END;
    key text;
    slot smallint;
    vec text;
    filter text;
    n bigint;
BEGIN
    SELECT coalesce(_fb_candidates.model, a.model),
           CASE WHEN _fb_candidates.model IS NULL OR _fb_candidates.model = a.model THEN a.slot
                ELSE (SELECT s.slot FROM feedback_embedding_slots s
                       WHERE s.model = _fb_candidates.model AND NOT s.active) END
      INTO key, slot
      FROM _fb_active() a;
    vec := CASE slot WHEN 1 THEN 'embedding' WHEN 2 THEN 'embedding_alt' END;
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
    -- $1 query vector, $2 task_type, $3 model key, $4 scoped, $5 tenant, $6 tenants, $7 k
    filter := format('f.status = ''active'' AND f.%I = $3 AND f.%I IS NOT NULL '
                     'AND CASE WHEN $4 THEN f.tenant IS NOT DISTINCT FROM $5 '
                     'ELSE f.tenant IS NULL OR f.tenant = ANY ($6) END', vec || '_model', vec);
    IF mode = 'auto' THEN
        EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM feedback_notes f WHERE f.task_type = $2 AND %s '
                       'LIMIT $7) s', filter)
           INTO n USING q, p_task_type, key, scoped, p_tenant, tenants, exact_limit + 1;
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
COMMENT ON FUNCTION _fb_candidates(vector, text, integer, text, text, boolean, text) IS
    'Internal: the k nearest active notes of a task_type to a vector among those the acting role may see (shared '
    'and its tenants''), with lesson, correction and created_at, comparing only vectors of one model (default: the '
    'active one). mode auto: exact for small sets, HNSW iterative scan otherwise (see pg_feedback.exact_scan_limit); '
    'exact or ann force one path (fb_eval_ann compares them). scoped: only notes of exactly p_tenant.';

COMMENT ON TABLE feedback_note_merges IS
    'Provenance of near-duplicate merges: a submitted note (merged_hash = its content hash, its text and source) '
    'that was folded into an existing note (into_id) because their embeddings had cosine similarity >= '
    'pg_feedback.dup_threshold.';

COMMENT ON TABLE feedback_audit IS
    'Append-only trail of every review and status change, merge, purge, restore and model switch: who (actor), '
    'when, which note (note_id, and its content_hash at the time), old and new status, the reason. It never holds '
    'note text. Only feedback_reviewer reads it; UPDATE, DELETE and TRUNCATE are refused.';

------------------------------------------------------------------------------------------------------------------
-- Write path
------------------------------------------------------------------------------------------------------------------

-- A note with the server's cleaning applied (Rust, _fb_clean_note): blank or oversized fields refused, secrets
-- redacted, task_type and tenant normalised, content hashed from the redacted content (and tenant), lesson and
-- correction screened. Used by the insert and update triggers.
CREATE FUNCTION _fb_cleaned(n feedback_notes) RETURNS feedback_notes
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM _fb_clean_note(n.task_type, n.wrong_answer, n.correction, n.lesson, n.tenant);
    n.content_hash := c.content_hash;
    n.task_type := c.task_type;
    n.wrong_answer := c.wrong_answer;
    n.correction := c.correction;
    n.lesson := c.lesson;
    n.screening := c.screening;
    n.redactions := c.redactions;
    n.tenant := c.tenant;
    RETURN n;
END $$;
COMMENT ON FUNCTION _fb_cleaned(feedback_notes) IS 'Internal: a note as the server stores it (see _fb_clean_note).';

-- A source (provenance) as stored: redacted, whitespace normalised, 'review_ui' when blank.
CREATE FUNCTION _fb_source(source text) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN coalesce(nullif(_fb_normalize(fb_redact(source)), ''), 'review_ui');
COMMENT ON FUNCTION _fb_source(text) IS 'Internal: a source as stored (redacted, normalised, review_ui when blank).';

-- Re-submitting the same note counts a report on the stored row (its latest wrong_answer and source). SECURITY
-- DEFINER because writers have no UPDATE right; it cleans the note itself, so calling it directly can do no more
-- than submitting. Returns the cleaned note when none is stored yet (the insert trigger stores it), NULL when the
-- report was counted: the note is cleaned once per row. A report on a note that is not active leaves its status
-- alone (a reviewer decides) and says so in a NOTICE.
CREATE FUNCTION _fb_resubmit(n feedback_notes) RETURNS feedback_notes
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    stored record;
BEGIN
    n := _fb_cleaned(n);
    IF NOT _fb_tenant_allowed(n.tenant) THEN
        RETURN n;   -- the insert goes on and is refused by its tenant check
    END IF;
    -- A purged note counts the report but takes no text: its text was removed on purpose.
    UPDATE feedback_notes f
       SET wrong_answer = CASE WHEN f.status = 'purged' THEN f.wrong_answer
                               ELSE coalesce(nullif(n.wrong_answer, ''), f.wrong_answer) END,
           source = CASE WHEN f.status = 'purged' OR _fb_normalize(n.source) = '' THEN f.source
                         ELSE _fb_source(n.source) END,
           updated_at = now(),
           report_count = f.report_count + 1
     WHERE f.content_hash = n.content_hash AND f.tenant IS NOT DISTINCT FROM n.tenant
    RETURNING f.id, f.status INTO stored;
    IF NOT FOUND THEN
        RETURN n;
    END IF;
    IF stored.status <> 'active' THEN
        RAISE NOTICE 'note % is %: the report was counted, and it stays % (not retrieved)', stored.id,
                     stored.status, stored.status
            USING HINT = CASE stored.status
                             WHEN 'deprecated' THEN 'A reviewer can bring it back with fb_restore.'
                             WHEN 'pending' THEN 'It waits for a reviewer (feedback_review_queue).'
                             WHEN 'rejected' THEN 'A reviewer rejected it; fb_approve would make it live.'
                             ELSE 'Its text was purged; it is never retrieved again.' END;
    END IF;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION _fb_resubmit(feedback_notes) IS
    'Internal: counts a re-submission on the stored note with the same content (latest wrong_answer and source) '
    'and returns NULL; when no such note is stored, returns the note cleaned for storing.';

-- BEFORE INSERT, per row, as the inserting role: the server sets every field the client must not choose. A row
-- that comes back from a dump (see _fb_restoring) is kept as sent.
CREATE FUNCTION _fb_notes_before_insert() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    review text := _fb_review_mode();
    restore text := _fb_restoring(NEW.content_hash);
    cleaned feedback_notes;
    active record;
BEGIN
    IF restore IS NOT NULL THEN
        -- A reviewer (not a superuser) restores only notes of its own tenants.
        IF NEW.tenant IS NOT NULL AND NOT _fb_tenant_allowed(NEW.tenant) THEN
            RAISE EXCEPTION 'role "%" may not restore notes of tenant "%"', _fb_actor(), NEW.tenant
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'Restore as a superuser, or as a member of the tenant role.';
        END IF;
        NEW.task_type := _fb_task_type(NEW.task_type);   -- a no-op on dumped rows; refuses a blank one
        -- Only what is missing is computed: an id, a content hash, a vector (never for a purged note). A reviewer's
        -- rows get the server's id and hash: ids and hashes are what other rows and re-submissions rely on.
        IF restore = 'reviewer' OR NEW.id IS NULL THEN
            NEW.id := _fb_next_note_id();
        END IF;
        IF restore = 'reviewer' OR NEW.content_hash IS NULL THEN
            NEW.content_hash := fb_content_hash(NEW.task_type, NEW.lesson, NEW.correction, NEW.tenant);
        END IF;
        IF NEW.embedding IS NULL OR NEW.embedding_model IS NULL THEN
            NEW.embedding := NULL;
            NEW.embedding_model := NULL;
        END IF;
        IF NEW.embedding_alt IS NULL OR NEW.embedding_alt_model IS NULL THEN
            NEW.embedding_alt := NULL;
            NEW.embedding_alt_model := NULL;
        END IF;
        IF NEW.embedding IS NULL AND NEW.embedding_alt IS NULL AND NEW.status <> 'purged' THEN
            SELECT * INTO active FROM _fb_lock_active_model();   -- pins the model if this is the first vector
            NEW := _fb_with_vector(NEW, active.slot,
                                   (fb_embed_batch(ARRAY[fb_document_text(NEW.task_type, NEW.lesson)], false,
                                                   active.model))[1], active.model);
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.tenant IS NOT NULL AND NOT _fb_tenant_allowed(NEW.tenant) THEN
        RAISE EXCEPTION 'role "%" may not write notes of tenant "%"', _fb_actor(), NEW.tenant
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'A note''s tenant must be a role you are a member of, or NULL for a shared note.';
    END IF;
    IF _fb_on_conflict_do_nothing(TG_RELID) THEN
        -- INSERT ... ON CONFLICT DO NOTHING: no report is counted here; a row whose content is stored meets it at
        -- content_hash and Postgres skips it.
        cleaned := _fb_cleaned(NEW);
    ELSE
        cleaned := _fb_resubmit(NEW);
        IF cleaned IS NULL THEN
            RETURN NULL;   -- counted on the stored note; no new row
        END IF;
    END IF;
    NEW := cleaned;
    NEW.source := _fb_source(NEW.source);
    -- Server-set fields: whatever the client sent is replaced. No vector yet: the AFTER trigger embeds the new
    -- rows (a row without any vector model is how it tells them from restored rows).
    NEW.id := _fb_next_note_id();
    NEW.embedding := NULL;
    NEW.embedding_model := NULL;
    NEW.embedding_alt := NULL;
    NEW.embedding_alt_model := NULL;
    NEW.created_by := _fb_actor();
    NEW.created_at := now();
    NEW.updated_at := now();
    NEW.report_count := 1;
    NEW.status := CASE WHEN review = 'all' OR (review = 'flagged' AND jsonb_array_length(NEW.screening) > 0)
                       THEN 'pending' ELSE 'active' END;
    RETURN NEW;
END $$;

-- AFTER INSERT, per statement, with the extension owner's rights: embed every new row in batched model runs
-- (grouped into UPDATEs of at most 1024 rows) into the active slot, record held notes in the audit trail, merge
-- near-duplicates. For restored rows (they carry a vector, or are purged) the id sequence is only moved past
-- their ids.
CREATE FUNCTION _fb_notes_after_insert() RETURNS trigger
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
    IF new_ids IS NULL THEN
        RETURN NULL;
    END IF;
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

-- Folds each given (new, active) note into the most similar other active note of its task_type and tenant when
-- their cosine similarity (active model) reaches pg_feedback.dup_threshold: the existing note's report_count grows,
-- its source and updated_at take the new report's, the merge is recorded in feedback_note_merges and
-- feedback_audit, the new row goes away. A row lock per (tenant, task_type) in feedback_dedup_locks, taken in
-- sorted order until the end of the transaction, makes concurrent ingests of near-duplicates wait for each other,
-- so under READ COMMITTED the second one sees the first and merges.
CREATE FUNCTION _fb_merge_near_duplicates(ids bigint[]) RETURNS integer
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
    -- Row locks in a table of the extension's own (an advisory lock key would be open to anyone to take).
    INSERT INTO feedback_dedup_locks (tenant, task_type)
    SELECT DISTINCT coalesce(f.tenant, ''), f.task_type FROM feedback_notes f WHERE f.id = ANY (ids)
    ON CONFLICT DO NOTHING;
    PERFORM 1 FROM feedback_dedup_locks l
      JOIN (SELECT DISTINCT coalesce(f.tenant, '') AS tenant, f.task_type FROM feedback_notes f
             WHERE f.id = ANY (ids)) k USING (tenant, task_type)
     ORDER BY l.tenant, l.task_type
       FOR UPDATE OF l;
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
COMMENT ON FUNCTION _fb_merge_near_duplicates(bigint[]) IS
    'Internal: merges new notes into near-duplicate active notes of the same task_type and tenant '
    '(pg_feedback.dup_threshold, active model). Runs inside the insert trigger with the owner''s rights.';

-- BEFORE UPDATE of the content, per row (only the owner and superusers may UPDATE): the same cleaning as an
-- insert (redaction, screening, content hash); the id stays, so merges, golden questions and audit rows still
-- point at the note. A new vector of the active model when the embedded text changed; the other slot's vector
-- is then stale and goes (fb_reembed or fb_switch_model recompute it). A change of wrong_answer alone (a counted
-- re-submission) is only redacted: the identity, screening and vectors stay.
CREATE FUNCTION _fb_notes_before_update() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    active record;
    text_changed boolean;
BEGIN
    IF NEW.status = 'purged' THEN
        RETURN NEW;   -- fb_purge blanks the text: the note keeps its id and is never embedded again
    END IF;
    IF (NEW.task_type, NEW.lesson, NEW.correction, NEW.tenant) IS NOT DISTINCT FROM
       (OLD.task_type, OLD.lesson, OLD.correction, OLD.tenant) THEN
        NEW.wrong_answer := fb_redact(NEW.wrong_answer);
        NEW.updated_at := now();
        RETURN NEW;
    END IF;
    NEW := _fb_cleaned(NEW);
    NEW.id := OLD.id;
    NEW.redactions := ARRAY(SELECT DISTINCT unnest(OLD.redactions || NEW.redactions) ORDER BY 1);
    IF NEW.content_hash <> OLD.content_hash
       AND EXISTS (SELECT 1 FROM feedback_notes f WHERE f.content_hash = NEW.content_hash) THEN
        RAISE EXCEPTION 'another note already has this content (id %)',
                        (SELECT f.id FROM feedback_notes f WHERE f.content_hash = NEW.content_hash)
            USING ERRCODE = 'unique_violation',
                  HINT = 'Deprecate this note with fb_deprecate instead of editing it into a duplicate.';
    END IF;
    text_changed := fb_document_text(NEW.task_type, NEW.lesson) <> fb_document_text(OLD.task_type, OLD.lesson);
    SELECT * INTO active FROM _fb_lock_active_model();
    IF text_changed THEN
        -- Both slots' vectors were of the old text.
        NEW := _fb_with_vector(_fb_with_vector(NEW, 1::smallint, NULL, NULL), 2::smallint, NULL, NULL);
    END IF;
    IF text_changed OR NOT _fb_has_vector(NEW, active.slot, active.model) THEN
        NEW := _fb_with_vector(NEW, active.slot,
                               (fb_embed_batch(ARRAY[fb_document_text(NEW.task_type, NEW.lesson)], false,
                                               active.model))[1], active.model);
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END $$;

CREATE TRIGGER feedback_notes_before_insert BEFORE INSERT ON feedback_notes
    FOR EACH ROW EXECUTE FUNCTION _fb_notes_before_insert();
CREATE TRIGGER feedback_notes_after_insert AFTER INSERT ON feedback_notes
    REFERENCING NEW TABLE AS inserted_notes
    FOR EACH STATEMENT EXECUTE FUNCTION _fb_notes_after_insert();
CREATE TRIGGER feedback_notes_before_update
    BEFORE UPDATE OF task_type, wrong_answer, lesson, correction, tenant ON feedback_notes
    FOR EACH ROW EXECUTE FUNCTION _fb_notes_before_update();

COMMENT ON FUNCTION _fb_notes_before_insert() IS
    'Trigger: cleans a new note (redaction, screening, content hash), sets every server-owned field (id too), and '
    'turns a re-submission into a counted report (not under INSERT ... ON CONFLICT DO NOTHING, which skips it). A '
    'row restored by a superuser or reviewer (it carries its '
    'content_hash, or pg_feedback.restore_mode) is kept as sent.';
COMMENT ON FUNCTION _fb_notes_after_insert() IS
    'Trigger: embeds the new rows of an INSERT or COPY in batched model runs in the same transaction, audits held '
    'notes and merges near-duplicates; moves the id sequence past restored rows.';
COMMENT ON FUNCTION _fb_notes_before_update() IS
    'Trigger: re-cleans an edited note (redaction, screening, content hash; the id stays) and re-embeds it when its '
    'embedded text changed.';

------------------------------------------------------------------------------------------------------------------
-- Ingest API
------------------------------------------------------------------------------------------------------------------

CREATE TYPE fb_note_input AS (
    task_type    text,
    wrong_answer text,
    correction   text,
    lesson       text,
    source       text
);
COMMENT ON TYPE fb_note_input IS 'One note for fb_ingest_batch; a NULL source means ''review_ui''.';

-- What became of submitted notes, by content hash: the stored note's id and status, or the note it was merged
-- into. SECURITY DEFINER: writers cannot read feedback_notes; it reveals only the id and status of content they
-- submitted.
CREATE FUNCTION _fb_ingest_outcomes(hashes text[])
    RETURNS TABLE (content_hash text, id bigint, status text, into_id bigint)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT h.hash, f.id, f.status,
               (SELECT m.into_id FROM feedback_note_merges m JOIN feedback_notes t ON t.id = m.into_id
                 WHERE f.id IS NULL AND m.merged_hash = h.hash AND _fb_tenant_allowed(t.tenant)
                 ORDER BY m.merged_at DESC LIMIT 1)
          FROM (SELECT DISTINCT unnest(hashes) AS hash) h
          LEFT JOIN feedback_notes f ON f.content_hash = h.hash AND _fb_tenant_allowed(f.tenant);
    END;
COMMENT ON FUNCTION _fb_ingest_outcomes(text[]) IS
    'Internal: for content hashes, the stored note''s id and status, or the note it was merged into.';

-- SECURITY DEFINER so that it can learn which rows its INSERT created (RETURNING) while writers have no SELECT
-- on feedback_notes; the triggers act for the caller all the same (_fb_actor: provenance, tenant and restore checks).
CREATE FUNCTION fb_ingest_batch(notes fb_note_input[], tenant text DEFAULT NULL)
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
    -- finds the winner's row and counts a report on it.
    FOR attempt IN 1..3 LOOP
        BEGIN
            WITH ins AS (
                INSERT INTO feedback_notes AS f (task_type, wrong_answer, correction, lesson, source, tenant)
                SELECT n.task_type, coalesce(n.wrong_answer, ''), n.correction, n.lesson, n.source, fb_ingest_batch.tenant
                  FROM unnest(notes) WITH ORDINALITY AS n(task_type, wrong_answer, correction, lesson, source, ord)
                 ORDER BY ord
                RETURNING f.content_hash)
            SELECT coalesce(array_agg(ins.content_hash), '{}') INTO inserted FROM ins;
            EXIT;
        EXCEPTION WHEN unique_violation THEN
            IF attempt = 3 THEN
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

CREATE FUNCTION fb_ingest(task_type text, wrong_answer text, correction text, lesson text,
                          source text DEFAULT 'review_ui', tenant text DEFAULT NULL)
    RETURNS TABLE (id bigint, action text)
    LANGUAGE sql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT * FROM fb_ingest_batch(ARRAY[ROW(task_type, wrong_answer, correction, lesson, source)::fb_note_input],
                                      tenant);
    END;

COMMENT ON FUNCTION fb_ingest_batch(fb_note_input[], text) IS
    'Stores many notes with one INSERT (embedded in batched model runs), all of one tenant (NULL: shared). Returns, '
    'in input order, each note''s id and action: inserted; pending when it waits for a reviewer (flagged by '
    'fb_screen, or pg_feedback.review = all); merged when it was folded into a near-duplicate (the id is then the '
    'existing note''s); for the same correction already stored (or repeated in the batch), a counted report: updated '
    'when that note is active, else its status (deprecated, pending, rejected, purged), which a report never changes.';
COMMENT ON FUNCTION fb_ingest(text, text, text, text, text, text) IS
    'Stores one note: returns its id and action (see fb_ingest_batch). Secrets are redacted first; submitting the '
    'same correction again counts a report on the stored note (latest wrong_answer and source, report_count + 1), '
    'never duplicates it; a note whose embedding is within pg_feedback.dup_threshold of an active note of the same '
    'task_type and tenant is merged into it.';
COMMENT ON FUNCTION _fb_on_conflict_do_nothing(oid) IS
    'Internal: whether the client''s statement is an INSERT into the relation with ON CONFLICT DO NOTHING (the '
    'insert trigger then counts no report and lets Postgres skip a stored note).';

------------------------------------------------------------------------------------------------------------------
-- 7. Review, retrieval, evaluation, re-embedding (review.sql, retrieve.sql, eval.sql, reembed.sql).
------------------------------------------------------------------------------------------------------------------

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

CREATE FUNCTION fb_purge(note_id bigint, reason text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    why text := _fb_require_reason(reason, 'fb_purge');
    old text;
    hash text;
    merges integer;
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
       SET wrong_answer = '', correction = '[purged]', lesson = '[purged]', embedding = NULL, embedding_model = NULL,
           embedding_alt = NULL, embedding_alt_model = NULL, screening = '[]', status = 'purged', updated_at = now()
     WHERE id = note_id;
    -- The texts merged into this note were near-duplicates of it: they go too.
    UPDATE feedback_note_merges m SET lesson = '[purged]', correction = '[purged]' WHERE m.into_id = note_id;
    GET DIAGNOSTICS merges = ROW_COUNT;
    INSERT INTO feedback_audit (actor, action, note_id, content_hash, old_status, new_status, reason, detail)
    VALUES (_fb_actor(), 'purge', note_id, hash, old, 'purged', why, jsonb_build_object('merge_records_cleared', merges));
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
    UPDATE feedback_note_merges m SET lesson = '[purged]', correction = '[purged]'
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

CREATE VIEW feedback_review_queue WITH (security_barrier = true) AS
SELECT n.id, n.content_hash, n.task_type, n.tenant, n.lesson, n.correction, n.wrong_answer, n.screening AS findings,
       n.created_by AS reported_by, n.source, n.report_count, n.created_at, now() - n.created_at AS age
  FROM feedback_notes n
 WHERE n.status = 'pending'
   AND (n.tenant IS NULL OR n.tenant = ANY ((SELECT _fb_my_tenants())::text[]));
COMMENT ON VIEW feedback_review_queue IS
    'Notes waiting for a reviewer (status pending) of the tenants the current user belongs to, with fb_screen''s '
    'findings, who reported them and how long they have waited. fb_approve or fb_reject settles each.';

CREATE FUNCTION fb_retrieve(query text, task_type text, candidate_k integer DEFAULT 20, final_k integer DEFAULT 3,
                            min_score real DEFAULT NULL, rerank boolean DEFAULT NULL, model text DEFAULT NULL)
    RETURNS TABLE (rank integer, id bigint, lesson text, correction text, similarity real, rerank_score real,
                   scored_by text, created_at timestamptz)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    key text;
    q vector(384);
    use_rerank boolean;
    cand record;
    scores real[];
    floor real;
    picked integer[];
BEGIN
    IF candidate_k IS NULL OR candidate_k NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'candidate_k must be between 1 and 1000, not %', candidate_k
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Over-fetch about 20 candidates for the reranker.';
    END IF;
    IF final_k IS NULL OR final_k NOT BETWEEN 1 AND candidate_k THEN
        RAISE EXCEPTION 'final_k must be between 1 and candidate_k (%), not %', candidate_k, final_k
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'final_k is how many notes to return, at most the number of candidates.';
    END IF;
    IF query IS NULL OR task_type IS NULL THEN
        RETURN;
    END IF;
    -- Embedded in its own step, through the backend's query cache; first, so that the library is loaded and its
    -- settings defined before they are read. Only notes embedded by the same model are compared with it.
    key := _fb_resolve_model(model);
    q := (fb_embed_batch(ARRAY[query], true, key))[1];
    use_rerank := coalesce(rerank, current_setting('pg_feedback.rerank')::boolean) AND fb_rerank_model() <> '';
    SELECT array_agg(c.id ORDER BY c.distance, c.id) AS ids,
           array_agg(c.lesson ORDER BY c.distance, c.id) AS lessons,
           array_agg(c.correction ORDER BY c.distance, c.id) AS corrections,
           array_agg(c.lesson || ' ' || c.correction ORDER BY c.distance, c.id) AS passages,
           array_agg((1 - c.distance)::real ORDER BY c.distance, c.id) AS sims,
           array_agg(c.created_at ORDER BY c.distance, c.id) AS created
      INTO cand
      FROM _fb_candidates(q, _fb_task_type(fb_retrieve.task_type), candidate_k, model => key) c;
    IF cand.ids IS NULL THEN
        RETURN;   -- no notes for this task_type: zero rows is a normal answer
    END IF;

    IF use_rerank THEN
        -- The cross-encoder reads lesson and correction together: on the golden questions that beat the
        -- lesson alone (recall@3 0.911 vs 0.813 before any floor; results/floor_calibration.md).
        scores := fb_rerank(query, cand.passages);
        floor := coalesce(min_score, current_setting('pg_feedback.rerank_floor')::real);
    ELSE
        scores := cand.sims;
        floor := coalesce(min_score, current_setting('pg_feedback.cosine_floor')::real);
    END IF;
    picked := _fb_rank(scores, cand.created, floor, use_rerank, final_k);

    RETURN QUERY
    SELECT p.n::integer, cand.ids[p.i], cand.lessons[p.i], cand.corrections[p.i], cand.sims[p.i],
           CASE WHEN use_rerank THEN scores[p.i] END,
           CASE WHEN use_rerank THEN 'cross-encoder' ELSE 'cosine' END,
           cand.created[p.i]
      FROM unnest(picked) WITH ORDINALITY AS p(i, n)
     ORDER BY p.n;
END $$;

COMMENT ON FUNCTION fb_retrieve(text, text, integer, integer, real, boolean, text) IS
    'The notes that apply to a question, best first, or none. Embeds the query (cached per backend), takes the '
    'candidate_k nearest active notes of the task_type, reranks them with the cross-encoder (unless rerank => false, '
    'pg_feedback.rerank = off or no pg_feedback.rerank_model), keeps those scoring at least min_score (default: '
    'pg_feedback.rerank_floor, a logit; or pg_feedback.cosine_floor when ranking by cosine) and returns the best '
    'final_k; a newer note ranks first on a near tie (pg_feedback.tie_margin). scored_by says which score ranked. '
    'Only notes embedded by the active model are searched; model => a model held in the standby slot (fb_reembed) '
    'searches its vectors instead, to try it before fb_switch_model. Never writes.';

CREATE FUNCTION fb_find_duplicate(task_type text, lesson text)
    RETURNS TABLE (id bigint, lesson text, similarity real, would_merge boolean)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT c.id, c.lesson, (1 - c.distance)::real,
               1 - c.distance >= current_setting('pg_feedback.dup_threshold')::double precision
                   AND current_setting('pg_feedback.dup_threshold')::double precision < 1
          FROM _fb_candidates(fb_embed(fb_document_text(fb_find_duplicate.task_type, fb_find_duplicate.lesson)),
                              _fb_task_type(fb_find_duplicate.task_type), 1) c;
    END;

COMMENT ON FUNCTION fb_find_duplicate(text, text) IS
    'The active note of the task_type nearest to a lesson (active model), its cosine similarity, and whether ingesting the lesson '
    'would merge into it (similarity >= pg_feedback.dup_threshold).';

CREATE FUNCTION fb_build_prompt(query text, task_type text,
                                base_instructions text DEFAULT
                                    'You are a careful code reviewer. Apply the lessons from prior reviewer '
                                    'corrections below where they are relevant to the task.',
                                max_context_tokens integer DEFAULT 800)
    RETURNS text
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT _fb_build_prompt(base_instructions,
                                coalesce(array_agg(r.lesson ORDER BY r.rank), '{}'),
                                coalesce(array_agg(r.correction ORDER BY r.rank), '{}'),
                                max_context_tokens)
          FROM fb_retrieve(query, task_type) r;
    END;

COMMENT ON FUNCTION fb_build_prompt(text, text, text, integer) IS
    'A prompt: base_instructions, then the retrieved lessons numbered in rank order inside '
    '<prior_corrections> ... </prior_corrections> (as many as fit max_context_tokens, counted with the embedding '
    'model''s tokenizer over the whole block), then the instruction to treat the block as untrusted reference data. '
    'Angle brackets and look-alikes in note text are escaped so no note can close or reopen the fence. '
    '"(no relevant prior corrections)" when nothing passes the floor.';

COMMENT ON FUNCTION fb_rerank_model() IS 'The configured cross-encoder (pg_feedback.rerank_model); empty: none.';
COMMENT ON FUNCTION _fb_rank(real[], timestamptz[], real, boolean, integer) IS
    'Internal: positions of the notes fb_retrieve returns, in rank order (floor, best first, newer first on near ties).';
COMMENT ON FUNCTION _fb_build_prompt(text, text[], text[], integer) IS
    'Internal: assembles fb_build_prompt''s text from ranked lessons and corrections.';

COMMENT ON TABLE feedback_golden IS
    'Golden questions for fb_eval: a query, its task_type, and the id of the note that should come back first, or '
    'NULL when the right answer is no note at all. Note ids never change, so an edited note stays the expected one.';

CREATE FUNCTION fb_eval(k integer DEFAULT 3, record boolean DEFAULT true, model text DEFAULT NULL)
    RETURNS TABLE (task_type text, questions integer, answerable integer, recall_at_k real, mrr real,
                   ndcg_at_k real, no_answer integer, no_answer_correct real, embedding_model text, scored_by text)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    key text := _fb_resolve_model(model);
    scorer text := CASE WHEN current_setting('pg_feedback.rerank')::boolean AND fb_rerank_model() <> ''
                        THEN 'cross-encoder' ELSE 'cosine' END;
    result jsonb;
BEGIN
    IF k IS NULL OR k < 1 OR k > 1000 THEN
        RAISE EXCEPTION 'k must be between 1 and 1000, not %', k
            USING ERRCODE = 'invalid_parameter_value', HINT = 'k is the cut-off of recall@k and nDCG@k, e.g. 3.';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM feedback_golden) THEN
        RAISE EXCEPTION 'feedback_golden is empty'
            USING ERRCODE = 'no_data_found',
                  HINT = 'Insert golden questions: (query, task_type, expected_id), expected_id NULL when no note should come back.';
    END IF;

    WITH answers AS (
        SELECT g.task_type, g.expected_id,
               (SELECT array_agg(r.id ORDER BY r.rank)
                  FROM fb_retrieve(g.query, g.task_type, greatest(20, k), k, model => key) r) AS got
          FROM feedback_golden g
    ), scored AS (
        SELECT _fb_task_type(a.task_type) AS task_type, a.expected_id IS NOT NULL AS answerable,
               array_position(a.got, a.expected_id) AS pos, coalesce(cardinality(a.got), 0) = 0 AS empty
          FROM answers a
    ), rows AS (
        SELECT coalesce(s.task_type, '(all)') AS task_type,
               count(*)::integer AS questions,
               count(*) FILTER (WHERE s.answerable)::integer AS answerable,
               (avg(CASE WHEN s.pos IS NOT NULL THEN 1 ELSE 0 END) FILTER (WHERE s.answerable))::real AS recall_at_k,
               (avg(coalesce(1.0 / s.pos, 0)) FILTER (WHERE s.answerable))::real AS mrr,
               (avg(coalesce(1 / log(2, s.pos + 1), 0)) FILTER (WHERE s.answerable))::real AS ndcg_at_k,
               count(*) FILTER (WHERE NOT s.answerable)::integer AS no_answer,
               (avg(CASE WHEN s.empty THEN 1 ELSE 0 END) FILTER (WHERE NOT s.answerable))::real AS no_answer_correct,
               grouping(s.task_type) AS overall
          FROM scored s
         GROUP BY GROUPING SETS ((s.task_type), ())
    )
    SELECT jsonb_agg(to_jsonb(r) - 'overall' ORDER BY r.overall, r.task_type) INTO result FROM rows r;

    IF record THEN
        INSERT INTO fb_eval_runs (k, embedding_model, scored_by, settings, questions, recall_at_k, mrr, ndcg_at_k,
                                  no_answer_correct, by_task_type)
        SELECT k, key, scorer,
               (SELECT jsonb_object_agg(name, setting) FROM pg_settings WHERE name LIKE 'pg_feedback.%'),
               (o ->> 'questions')::integer, (o ->> 'recall_at_k')::real, (o ->> 'mrr')::real,
               (o ->> 'ndcg_at_k')::real, (o ->> 'no_answer_correct')::real,
               (SELECT jsonb_agg(e) FROM jsonb_array_elements(result) e WHERE e ->> 'task_type' <> '(all)')
          FROM jsonb_array_elements(result) o
         WHERE o ->> 'task_type' = '(all)';
    END IF;

    RETURN QUERY
    SELECT x.task_type, x.questions, x.answerable, x.recall_at_k, x.mrr, x.ndcg_at_k, x.no_answer,
           x.no_answer_correct, key, scorer
      FROM jsonb_to_recordset(result) AS x(task_type text, questions integer, answerable integer, recall_at_k real,
                                           mrr real, ndcg_at_k real, no_answer integer, no_answer_correct real);
END $$;

COMMENT ON FUNCTION fb_eval(integer, boolean, text) IS
    'Scores retrieval on feedback_golden through fb_retrieve (same settings users get): per task_type and overall '
    '("(all)", last row), recall@k, MRR and nDCG@k over questions that expect a note, and for questions that expect '
    'none the share that got zero rows. Records the run in fb_eval_runs unless record => false. model => a model '
    'in the standby slot scores its vectors (fb_reembed) before fb_switch_model makes it the active one.';

CREATE FUNCTION fb_eval_ann(sample integer DEFAULT 100, k integer DEFAULT 20)
    RETURNS TABLE (task_type text, queries integer, recall real, ann_returned real)
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
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
    END;

COMMENT ON FUNCTION fb_eval_ann(integer, integer) IS
    'Recall of the ANN stage against exact search: for sample random active notes (their embeddings as queries), '
    'the share of the k exact nearest notes of the same task_type that the HNSW path (iterative scan) also returns, '
    'per task_type and overall, and how many it returned on average.';

CREATE VIEW fb_eval_history AS
SELECT r.id, r.run_at, r.k, r.embedding_model, r.scored_by, r.questions, r.recall_at_k, r.mrr, r.ndcg_at_k,
       r.no_answer_correct,
       r.recall_at_k - lag(r.recall_at_k) OVER w AS recall_change,
       r.mrr - lag(r.mrr) OVER w AS mrr_change,
       r.no_answer_correct - lag(r.no_answer_correct) OVER w AS no_answer_change
  FROM fb_eval_runs r
WINDOW w AS (PARTITION BY r.k ORDER BY r.run_at, r.id);

COMMENT ON VIEW fb_eval_history IS
    'Every fb_eval run with its overall numbers and the change from the previous run with the same k.';

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

-- Whether the backend that started a run at started_at is still running that statement (the CALL began before the
-- run, and is still active). SECURITY DEFINER: pg_stat_activity shows another role's state only to its members.
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

-- The first step of fb_reembed: the model's key, the slot it fills and a run row. Another model goes to the
-- standby slot (assigned to it). The active model fills its own slot's gaps: notes restored without a vector of
-- it, or left from an update of an older version whose model is no longer installed.
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

-- One batch of fb_reembed: the next notes (by id, after after_id) whose vector in the slot is missing or of
-- another model, embedded in batched model runs and written to the slot. No row is locked while the model runs:
-- a note edited meanwhile (its embedded text changed) is skipped here, keeps the vector its edit gave it, and is
-- picked up by a later run or the switch. Refuses when the slot was given to another model meanwhile. Returns
-- how many notes were read, how many written, and the last id read.
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
        SELECT e.recall_at_k INTO before_recall FROM fb_eval(3, false) e WHERE e.task_type = '(all)';
        SELECT e.recall_at_k INTO after_recall FROM fb_eval(3, false, k) e WHERE e.task_type = '(all)';
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

------------------------------------------------------------------------------------------------------------------
-- 8. Roles and privileges (security.sql), for the new and replaced objects.
------------------------------------------------------------------------------------------------------------------

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'feedback_reader') THEN
        CREATE ROLE feedback_reader NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'feedback_writer') THEN
        CREATE ROLE feedback_writer NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'feedback_reviewer') THEN
        CREATE ROLE feedback_reviewer NOLOGIN;
    END IF;
    IF NOT pg_catalog.pg_has_role('feedback_writer', 'feedback_reader', 'MEMBER') THEN
        GRANT feedback_reader TO feedback_writer;
    END IF;
    IF NOT pg_catalog.pg_has_role('feedback_reviewer', 'feedback_writer', 'MEMBER') THEN
        GRANT feedback_writer TO feedback_reviewer;
    END IF;
END $$;

-- Every function of this extension: nothing for PUBLIC.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT d.objid::regprocedure
          FROM pg_catalog.pg_depend d
         WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.deptype = 'e'
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass
           AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'pg_feedback')
    LOOP
        EXECUTE format('REVOKE ALL ON ROUTINE %s FROM PUBLIC', f);
    END LOOP;
END $$;
REVOKE ALL ON feedback_notes, feedback_note_merges, feedback_dedup_locks, feedback_audit, feedback_golden, fb_eval_runs,
              feedback_embedding_slots, feedback_reembed_runs, feedback_active_notes, feedback_review_queue,
              fb_eval_history, feedback_reembed_progress, feedback_embedding_status FROM PUBLIC;
REVOKE ALL ON SEQUENCE feedback_notes_id_seq, feedback_audit_id_seq, feedback_golden_id_seq, fb_eval_runs_id_seq,
              feedback_reembed_runs_id_seq FROM PUBLIC;

-- Readers: retrieval, prompts, duplicates lookup, embeddings, screening and redaction; active notes of their
-- tenants through feedback_active_notes; which model is active. No right on feedback_notes itself.
GRANT SELECT ON feedback_active_notes, feedback_embedding_slots TO feedback_reader;
GRANT EXECUTE ON FUNCTION
    fb_retrieve(text, text, integer, integer, real, boolean, text),
    fb_build_prompt(text, text, text, integer),
    fb_find_duplicate(text, text),
    fb_embed(text), fb_embed_query(text), fb_embed_batch(text[], boolean, text),
    fb_rerank(text, text[]), fb_count_tokens(text),
    fb_embedding_model(), fb_rerank_model(), fb_models(), fb_model_stats(),
    fb_content_hash(text, text, text, text), fb_document_text(text, text),
    fb_screen(text), fb_redact(text),
    _fb_embed_with(text, text[], boolean), _fb_model_key(text), _fb_default_model(), _fb_installed_models(),
    _fb_active(), _fb_active_slot(), _fb_active_model(), _fb_slot_of(text), _fb_resolve_model(text),
    _fb_normalize(text),
    _fb_vector(feedback_notes, smallint), _fb_has_vector(feedback_notes, smallint, text),
    _fb_candidates(vector, text, integer, text, text, boolean, text),
    _fb_rank(real[], timestamptz[], real, boolean, integer),
    _fb_build_prompt(text, text[], text[], integer),
    _fb_my_tenants(), _fb_actor(), _fb_task_type(text)
TO feedback_reader;

-- Writers: readers' rights plus INSERT and COPY into feedback_notes, fb_ingest and fb_ingest_batch. No UPDATE or
-- DELETE anywhere: the triggers' updates and merges run in SECURITY DEFINER functions. No SELECT either (not even
-- of ids): INSERT ... RETURNING is for reviewers; fb_ingest returns the id and what became of the note.
GRANT INSERT ON feedback_notes TO feedback_writer;
GRANT EXECUTE ON FUNCTION
    fb_ingest(text, text, text, text, text, text),
    fb_ingest_batch(fb_note_input[], text),
    _fb_clean_note(text, text, text, text, text), _fb_cleaned(feedback_notes), _fb_source(text),
    _fb_resubmit(feedback_notes), _fb_next_note_id(), _fb_pin_model(), _fb_lock_active_model(),
    _fb_with_vector(feedback_notes, smallint, vector, text),
    _fb_ingest_outcomes(text[]),
    _fb_tenant_allowed(text), _fb_restoring(text), _fb_review_mode(), _fb_restore_mode(),
    _fb_on_conflict_do_nothing(oid)
TO feedback_writer;

-- Reviewers: writers' rights plus the review queue, the lifecycle functions, the audit trail, merges, every note
-- (all statuses), golden questions and evaluation, and the embedding status. Re-embedding and switching models
-- stay with superusers.
GRANT SELECT ON feedback_notes, feedback_note_merges, feedback_audit, feedback_review_queue, fb_eval_runs,
                fb_eval_history, feedback_reembed_runs, feedback_reembed_progress, feedback_embedding_status
   TO feedback_reviewer;
GRANT SELECT, INSERT, UPDATE, DELETE ON feedback_golden TO feedback_reviewer;
GRANT USAGE ON SEQUENCE feedback_golden_id_seq, fb_eval_runs_id_seq TO feedback_reviewer;
GRANT INSERT ON fb_eval_runs TO feedback_reviewer;
GRANT EXECUTE ON FUNCTION
    fb_approve(bigint, text), fb_reject(bigint, text), fb_deprecate(bigint, text), fb_restore(bigint, text),
    fb_deprecate_stale(interval, text), fb_purge(bigint, text), fb_purge_merged(text, text),
    fb_eval(integer, boolean, text), fb_eval_ann(integer, integer), _fb_reembed_running(integer, timestamptz)
TO feedback_reviewer;
