-- pg_feedback: which embedding model a database uses, and the embedding functions.
-- A model is pinned by its key, "name@sha256" of its weights (_fb_model_key). feedback_notes holds two vector
-- slots (embedding / embedding_alt, each with the key of the model that computed it); one slot is active, and
-- retrieval and near-duplicate checks compare only vectors of the active model in the active slot. fb_reembed
-- fills the other slot with another model while search goes on; fb_switch_model makes it the active one.

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

-- Before the first vector is stored: slot 1 and the key of the model pg_feedback.embedding_model names (the call
-- also loads the library, so settings are defined when callers read them). A set-returning function, so a query
-- that joins it reads the slots once, not per row.
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
CREATE FUNCTION _fb_slot_of(model text) RETURNS smallint
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN (SELECT CASE WHEN a.model = $1 THEN a.slot
                        ELSE (SELECT s.slot FROM feedback_embedding_slots s WHERE s.model = $1 AND NOT s.active) END
              FROM _fb_active() a);
CREATE FUNCTION _fb_resolve_model(model text) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN CASE WHEN model IS NULL THEN _fb_active_model()
                WHEN strpos(model, '@') > 0 THEN model
                ELSE _fb_model_key(_fb_normalize(model)) END;
-- SECURITY DEFINER: a restoring reviewer embeds too; it can pin only what pg_feedback.embedding_model
-- (superuser-set) names.
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
