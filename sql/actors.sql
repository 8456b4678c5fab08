-- pg_feedback: who is acting, and which tenants and rights that gives. Used by every other file.

------------------------------------------------------------------------------------------------------------------
-- Who is acting
------------------------------------------------------------------------------------------------------------------

-- Not current_user: inside SECURITY DEFINER functions that is the extension owner, and provenance, audit rows
-- and the restore check must name the caller.
CREATE FUNCTION _fb_actor() RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN CASE WHEN current_setting('role') = 'none' THEN session_user::text ELSE current_setting('role') END;
COMMENT ON FUNCTION _fb_actor() IS
    'Internal: the role acting (SET ROLE role, else session user), also inside SECURITY DEFINER functions.';

-- A superuser is a member of every role. Evaluated once per query.
CREATE FUNCTION _fb_my_tenants() RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT coalesce(array_agg(r.rolname::text), '{}') FROM pg_catalog.pg_roles r
         WHERE pg_catalog.pg_has_role(_fb_actor(), r.oid, 'MEMBER');
    END;
COMMENT ON FUNCTION _fb_my_tenants() IS
    'Internal: names of the roles the acting role is a member of (its tenants).';

CREATE FUNCTION _fb_tenant_allowed(tenant text) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN tenant IS NULL
        OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                    WHERE r.rolname = tenant AND pg_catalog.pg_has_role(_fb_actor(), r.oid, 'MEMBER'));
COMMENT ON FUNCTION _fb_tenant_allowed(text) IS
    'Internal: true for a shared note (tenant NULL) or when the acting role is a member of the tenant role.';

-- content_hash marks a restored row because only the server sets it and every dump carries it. A superuser's row
-- is kept exactly as sent: pg_dump restores are faithful with nothing to set. A reviewer's rows keep their text,
-- vectors, status, timestamps and counts.
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
