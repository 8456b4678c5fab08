-- pg_feedback: who is acting, and which tenants and rights that gives. Used by every other file.

------------------------------------------------------------------------------------------------------------------
-- Who is acting
------------------------------------------------------------------------------------------------------------------

-- The role a statement runs for: the SET ROLE role if any, else the session user. Unlike current_user it is the
-- same inside SECURITY DEFINER functions, so provenance, audit rows and the restore check name the caller, not
-- the extension owner.
CREATE FUNCTION _fb_actor() RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN CASE WHEN current_setting('role') = 'none' THEN session_user::text ELSE current_setting('role') END;
COMMENT ON FUNCTION _fb_actor() IS
    'Internal: the role acting (SET ROLE role, else session user), also inside SECURITY DEFINER functions.';

-- The tenants (roles) the acting role belongs to (a superuser: every role). Evaluated once per query.
CREATE FUNCTION _fb_my_tenants() RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT coalesce(array_agg(r.rolname::text), '{}') FROM pg_catalog.pg_roles r
         WHERE pg_catalog.pg_has_role(_fb_actor(), r.oid, 'MEMBER');
    END;
COMMENT ON FUNCTION _fb_my_tenants() IS
    'Internal: names of the roles the acting role is a member of (its tenants).';

-- Whether the acting role may see or change a note of this tenant: shared notes (NULL) belong to everyone.
CREATE FUNCTION _fb_tenant_allowed(tenant text) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN tenant IS NULL
        OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                    WHERE r.rolname = tenant AND pg_catalog.pg_has_role(_fb_actor(), r.oid, 'MEMBER'));
COMMENT ON FUNCTION _fb_tenant_allowed(text) IS
    'Internal: true for a shared note (tenant NULL) or when the acting role is a member of the tenant role.';

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
