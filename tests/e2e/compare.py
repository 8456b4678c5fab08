"""Shared by the upgrade and dump/restore end-to-end scripts: the extension's tables, their rows as comparable text,
row diffs between two databases, and a normalised snapshot of everything an extension owns (diffed fresh vs upgraded).
"""

import difflib
from collections import Counter

from psycopg import sql

EXAMPLES = 3
MAX_VALUE = 80


def _extension(conn, extname):
    row = conn.execute("SELECT oid, extnamespace FROM pg_extension WHERE extname = %s", (extname,)).fetchone()
    if row is None:
        raise LookupError(f"extension {extname} is not installed in {conn.info.dbname}")
    return row


def extension_tables(conn, extname="pg_feedback"):
    """Names of the extension's member tables in its schema, sorted."""
    ext_oid, nsp = _extension(conn, extname)
    rows = conn.execute(
        "SELECT c.relname FROM pg_depend d JOIN pg_class c ON c.oid = d.objid"
        " WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_extension'::regclass"
        " AND d.refobjid = %s AND d.deptype = 'e' AND c.relkind = 'r' AND c.relnamespace = %s"
        " ORDER BY c.relname COLLATE \"C\"", (ext_oid, nsp)).fetchall()
    return [r[0] for r in rows]


def _ident(table):
    """'name' or 'schema.name' as a quoted identifier."""
    return sql.Identifier(*table.split(".", 1))


def _regclass(conn, table):
    """The table's oid, or None when it does not exist."""
    return conn.execute("SELECT to_regclass(%s)::oid", (_ident(table).as_string(conn),)).fetchone()[0]


def columns(conn, table):
    return [r[0] for r in conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped"
        " ORDER BY attnum", (_ident(table).as_string(conn),)).fetchall()]


def table_rows(conn, table, exclude_columns=()):
    """Every row of table (all columns but the excluded ones) as tuples of text as Postgres prints it, in a fixed
    order: sorted by every selected column. Sets the session's TimeZone, DateStyle and float output first."""
    conn.execute("SET TimeZone = 'UTC'")
    conn.execute("SET extra_float_digits = 3")
    conn.execute("SET DateStyle = 'ISO, YMD'")
    conn.execute("SET IntervalStyle = 'postgres'")
    conn.execute("SET bytea_output = 'hex'")
    skip = set(exclude_columns)
    cols = [c for c in columns(conn, table) if c not in skip]
    texts = [sql.SQL("{}::text").format(sql.Identifier(c)) for c in cols]
    query = sql.SQL("SELECT {} FROM {}").format(sql.SQL(", ").join(texts), _ident(table))
    if texts:
        query += sql.SQL(" ORDER BY {}").format(sql.SQL(", ").join(t + sql.SQL(' COLLATE "C"') for t in texts))
    return conn.execute(query).fetchall()


def _short(value):
    if value is None:
        return "NULL"
    return repr(value if len(value) <= MAX_VALUE else value[:MAX_VALUE - 3] + "...")


def _format_row(row):
    return "(" + ", ".join(_short(v) for v in row) + ")"


def diff_tables(conn_a, conn_b, tables, exclude=None):
    """Problems found comparing each table's rows in A and B (exclude: table name -> columns to skip); [] when equal."""
    exclude = exclude or {}
    problems = []
    for table in tables:
        missing = [side for side, conn in (("A", conn_a), ("B", conn_b)) if _regclass(conn, table) is None]
        if missing:
            problems.append(f"{table}: missing in {' and '.join(missing)}")
            continue
        skip = exclude.get(table, ())
        cols_a = [c for c in columns(conn_a, table) if c not in skip]
        cols_b = [c for c in columns(conn_b, table) if c not in skip]
        rows_a, rows_b = table_rows(conn_a, table, skip), table_rows(conn_b, table, skip)
        if len(rows_a) != len(rows_b):
            problems.append(f"{table}: {len(rows_a)} rows in A, {len(rows_b)} rows in B")
        if cols_a != cols_b:
            problems.append(f"{table}: columns differ: A {cols_a}, B {cols_b}")
            continue
        count_a, count_b = Counter(rows_a), Counter(rows_b)
        for side, only in (("A", count_a - count_b), ("B", count_b - count_a)):
            rows = sorted(only.elements(), key=lambda r: tuple((v is None, v or "") for v in r))
            for row in rows[:EXAMPLES]:
                problems.append(f"{table}: only in {side}: {_format_row(row)}")
            if len(rows) > EXAMPLES:
                problems.append(f"{table}: ... and {len(rows) - EXAMPLES} more rows only in {side}")
    return problems


# Each query yields (kind, name, item, text) for the extension whose oid is %(ext)s; a text with several lines
# becomes one snapshot line per text line, in order. Names are schema-qualified (search_path is pg_catalog).
_MEMBERS = """
    SELECT classid, objid FROM pg_depend
    WHERE refclassid = 'pg_extension'::regclass AND refobjid = %(ext)s AND deptype = 'e'
"""

_RELS = f"""
    WITH m AS ({_MEMBERS}), rels AS (
        SELECT objid AS oid FROM m WHERE classid = 'pg_class'::regclass
        UNION
        SELECT d.objid FROM pg_depend d JOIN m ON m.classid = 'pg_class'::regclass AND d.refobjid = m.objid
        JOIN pg_class s ON s.oid = d.objid
        WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
          AND d.deptype IN ('a', 'i') AND s.relkind = 'S'
    )
    SELECT c.oid, format('%%I.%%I', n.nspname, c.relname) AS name,
        CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'v' THEN 'view'
            WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence' WHEN 'f' THEN 'foreign table'
            WHEN 'c' THEN 'composite' WHEN 'i' THEN 'index' ELSE 'relation' END AS kind,
        c.relkind
    FROM rels JOIN pg_class c ON c.oid = rels.oid JOIN pg_namespace n ON n.oid = c.relnamespace
"""

# Member types, less the row types of tables, views and sequences (and their arrays): their relation covers them.
_TYPES = f"""
    SELECT t.* FROM pg_type t JOIN ({_MEMBERS}) m ON m.classid = 'pg_type'::regclass AND m.objid = t.oid
    WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.reltype IN (t.oid, nullif(t.typelem, 0)) AND c.relkind <> 'c')
"""

_QUERIES = [
    # extension
    """SELECT 'extension', e.extname, 'schema', n.nspname FROM pg_extension e
       JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.oid = %(ext)s""",
    """SELECT 'extension', e.extname, 'config ' || format('%%I.%%I', n.nspname, c.relname),
           coalesce(quote_literal(e.extcondition[cfg.i]), '(none)')
       FROM pg_extension e, unnest(e.extconfig) WITH ORDINALITY AS cfg(reloid, i)
       JOIN pg_class c ON c.oid = cfg.reloid JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE e.oid = %(ext)s""",
    f"""SELECT 'init privileges', pg_describe_object(p.classoid, p.objoid, p.objsubid), 'acl', p.initprivs::text
       FROM pg_init_privs p JOIN ({_MEMBERS}) m ON m.classid = p.classoid AND m.objid = p.objoid
       WHERE p.privtype = 'e'""",
    # functions, procedures, aggregates
    f"""SELECT CASE p.prokind WHEN 'p' THEN 'procedure' WHEN 'a' THEN 'aggregate' WHEN 'w' THEN 'window function'
               ELSE 'function' END, p.oid::regprocedure::text, x.item, x.text
       FROM pg_proc p JOIN ({_MEMBERS}) m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
       CROSS JOIN LATERAL (VALUES
           ('acl', coalesce(p.proacl::text, '(default)')),
           ('comment', obj_description(p.oid, 'pg_proc')),
           ('def', CASE WHEN p.prokind <> 'a' THEN pg_get_functiondef(p.oid) END),
           ('returns', CASE WHEN p.prokind = 'a' THEN pg_get_function_result(p.oid) END)
       ) AS x(item, text)""",
    f"""SELECT 'aggregate', a.aggfnoid::regprocedure::text, 'def', concat_ws(' ',
           'kind=' || a.aggkind::text, 'direct_args=' || a.aggnumdirectargs,
           'sfunc=' || a.aggtransfn::oid::regprocedure, 'stype=' || format_type(a.aggtranstype, NULL),
           'sspace=' || a.aggtransspace, 'finalfunc=' || a.aggfinalfn::oid::regprocedure,
           'finalextra=' || a.aggfinalextra, 'finalmodify=' || a.aggfinalmodify::text,
           'combinefunc=' || a.aggcombinefn::oid::regprocedure,
           'serialfunc=' || a.aggserialfn::oid::regprocedure, 'deserialfunc=' || a.aggdeserialfn::oid::regprocedure,
           'msfunc=' || a.aggmtransfn::oid::regprocedure, 'minvfunc=' || a.aggminvtransfn::oid::regprocedure,
           'mstype=' || format_type(nullif(a.aggmtranstype, 0), NULL),
           'mfinalfunc=' || a.aggmfinalfn::oid::regprocedure, 'sortop=' || nullif(a.aggsortop, 0)::regoperator,
           'initcond=' || quote_literal(a.agginitval), 'minitcond=' || quote_literal(a.aggminitval))
       FROM pg_aggregate a JOIN ({_MEMBERS}) m ON m.classid = 'pg_proc'::regclass AND m.objid = a.aggfnoid""",
    # relations
    f"""SELECT r.kind, r.name, x.item, x.text FROM ({_RELS}) r JOIN pg_class c ON c.oid = r.oid
       CROSS JOIN LATERAL (VALUES
           ('relkind', c.relkind::text),
           ('persistence', c.relpersistence::text),
           ('options', c.reloptions::text),
           ('acl', coalesce(c.relacl::text, '(default)')),
           ('comment', obj_description(c.oid, 'pg_class')),
           ('row security', CASE WHEN c.relkind IN ('r', 'p')
               THEN concat_ws(' ', 'enabled=' || c.relrowsecurity, 'forced=' || c.relforcerowsecurity) END),
           ('replica identity', CASE WHEN c.relkind IN ('r', 'p') THEN c.relreplident::text END),
           ('partition key', CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END),
           ('partition bound', pg_get_expr(c.relpartbound, c.oid)),
           ('def', CASE WHEN c.relkind IN ('v', 'm') THEN pg_get_viewdef(c.oid, true) END)
       ) AS x(item, text)""",
    f"""SELECT r.kind, r.name, 'column ' || lpad((SELECT count(*) FROM pg_attribute p WHERE p.attrelid = a.attrelid AND p.attnum > 0
               AND p.attnum <= a.attnum AND NOT p.attisdropped)::text, 4, '0') || ' ' || quote_ident(a.attname) || x.item,
           x.text
       FROM ({_RELS}) r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
           AND r.relkind <> 'S'
       JOIN pg_type t ON t.oid = a.atttypid
       LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
       CROSS JOIN LATERAL (VALUES
           ('', concat_ws(' ', format_type(a.atttypid, a.atttypmod),
               CASE WHEN a.attcollation <> t.typcollation THEN 'collate ' || a.attcollation::regcollation END,
               CASE WHEN a.attnotnull THEN 'not null' END,
               'default ' || CASE WHEN a.attgenerated = '' THEN pg_get_expr(ad.adbin, ad.adrelid) END,
               CASE a.attidentity WHEN 'a' THEN 'identity always' WHEN 'd' THEN 'identity by default' END,
               CASE a.attgenerated WHEN 's' THEN 'generated stored ' WHEN 'v' THEN 'generated virtual ' END
                   || pg_get_expr(ad.adbin, ad.adrelid),
               'storage ' || CASE WHEN a.attstorage <> t.typstorage THEN a.attstorage::text END,
               'compression ' || nullif(a.attcompression::text, ''),
               'options ' || a.attoptions::text)),
           (' acl', a.attacl::text),
           (' comment', col_description(a.attrelid, a.attnum))
       ) AS x(item, text)""",
    f"""SELECT r.kind, r.name, 'constraint ' || quote_ident(co.conname) || x.item, x.text
       FROM ({_RELS}) r JOIN pg_constraint co ON co.conrelid = r.oid
       CROSS JOIN LATERAL (VALUES
           ('', pg_get_constraintdef(co.oid)),
           (' comment', obj_description(co.oid, 'pg_constraint'))
       ) AS x(item, text)""",
    f"""SELECT r.kind, r.name, 'index ' || quote_ident(ic.relname) || x.item, x.text
       FROM ({_RELS}) r JOIN pg_index i ON i.indrelid = r.oid JOIN pg_class ic ON ic.oid = i.indexrelid
       CROSS JOIN LATERAL (VALUES
           ('', pg_get_indexdef(i.indexrelid)),
           (' options', ic.reloptions::text),
           (' comment', obj_description(ic.oid, 'pg_class'))
       ) AS x(item, text)""",
    f"""SELECT r.kind, r.name, 'trigger ' || quote_ident(tg.tgname) || x.item, x.text
       FROM ({_RELS}) r JOIN pg_trigger tg ON tg.tgrelid = r.oid AND NOT tg.tgisinternal
       CROSS JOIN LATERAL (VALUES
           ('', pg_get_triggerdef(tg.oid)),
           (' enabled', tg.tgenabled::text),
           (' comment', obj_description(tg.oid, 'pg_trigger'))
       ) AS x(item, text)""",
    f"""SELECT r.kind, r.name, 'policy ' || quote_ident(po.polname), concat_ws(' ',
           CASE WHEN po.polpermissive THEN 'permissive' ELSE 'restrictive' END, 'for ' || po.polcmd::text,
           'to ' || (SELECT string_agg(CASE WHEN ro = 0 THEN 'public' ELSE ro::regrole::text END, ', '
                                       ORDER BY 1)
                     FROM unnest(po.polroles) AS ro),
           'using (' || pg_get_expr(po.polqual, po.polrelid) || ')',
           'with check (' || pg_get_expr(po.polwithcheck, po.polrelid) || ')')
       FROM ({_RELS}) r JOIN pg_policy po ON po.polrelid = r.oid""",
    f"""SELECT r.kind, r.name, 'rule ' || quote_ident(ru.rulename), pg_get_ruledef(ru.oid, true)
       FROM ({_RELS}) r JOIN pg_rewrite ru ON ru.ev_class = r.oid AND ru.rulename <> '_RETURN'""",
    f"""SELECT r.kind, r.name, 'def', concat_ws(' ', 'as ' || format_type(s.seqtypid, NULL),
           'increment ' || s.seqincrement, 'minvalue ' || s.seqmin, 'maxvalue ' || s.seqmax,
           'start ' || s.seqstart, 'cache ' || s.seqcache, CASE WHEN s.seqcycle THEN 'cycle' ELSE 'no cycle' END)
       FROM ({_RELS}) r JOIN pg_sequence s ON s.seqrelid = r.oid""",
    f"""SELECT r.kind, r.name, 'owned by', format('%%I.%%I.%%I', n.nspname, t.relname, a.attname)
       FROM ({_RELS}) r JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = r.oid
           AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i') AND d.refobjsubid > 0
       JOIN pg_class t ON t.oid = d.refobjid JOIN pg_namespace n ON n.oid = t.relnamespace
       JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = d.refobjsubid
       WHERE r.relkind = 'S'""",
    # types
    f"""SELECT 'type', t.oid::regtype::text, x.item, x.text
       FROM ({_TYPES}) t
       CROSS JOIN LATERAL (VALUES
           ('typtype', t.typtype::text),
           ('acl', coalesce(t.typacl::text, '(default)')),
           ('comment', obj_description(t.oid, 'pg_type')),
           ('def', CASE WHEN t.typtype IN ('b', 'p') THEN concat_ws(' ',
               'input=' || t.typinput::oid::regprocedure, 'output=' || t.typoutput::oid::regprocedure,
               'receive=' || t.typreceive::oid::regprocedure, 'send=' || t.typsend::oid::regprocedure,
               'typmod_in=' || t.typmodin::oid::regprocedure, 'typmod_out=' || t.typmodout::oid::regprocedure,
               'analyze=' || t.typanalyze::oid::regprocedure, 'subscript=' || t.typsubscript::oid::regprocedure,
               'internallength=' || t.typlen, 'passedbyvalue=' || t.typbyval, 'alignment=' || t.typalign::text,
               'storage=' || t.typstorage::text, 'category=' || t.typcategory::text, 'preferred=' || t.typispreferred,
               'delimiter=' || quote_literal(t.typdelim::text), 'element=' || nullif(t.typelem, 0)::regtype,
               'default=' || quote_literal(t.typdefault), 'collatable=' || (t.typcollation <> 0)) END),
           ('def', CASE WHEN t.typtype = 'd' THEN concat_ws(' ', format_type(t.typbasetype, t.typtypmod),
               CASE WHEN t.typnotnull THEN 'not null' END, 'default ' || t.typdefault) END)
       ) AS x(item, text)""",
    f"""SELECT 'type', t.oid::regtype::text, 'attribute ' || lpad(a.attnum::text, 4, '0') || ' '
           || quote_ident(a.attname), concat_ws(' ', format_type(a.atttypid, a.atttypmod),
           CASE WHEN a.attcollation <> at.typcollation THEN 'collate ' || a.attcollation::regcollation END)
       FROM ({_TYPES}) t
       JOIN pg_attribute a ON a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
       JOIN pg_type at ON at.oid = a.atttypid
       WHERE t.typtype = 'c'""",
    f"""SELECT 'type', t.oid::regtype::text, 'label ' || lpad(
           (row_number() OVER (PARTITION BY t.oid ORDER BY e.enumsortorder))::text, 4, '0'), e.enumlabel::text
       FROM ({_TYPES}) t
       JOIN pg_enum e ON e.enumtypid = t.oid""",
    f"""SELECT 'type', t.oid::regtype::text, 'constraint ' || quote_ident(co.conname), pg_get_constraintdef(co.oid)
       FROM ({_TYPES}) t
       JOIN pg_constraint co ON co.contypid = t.oid""",
    f"""SELECT 'type', t.oid::regtype::text, 'range', concat_ws(' ', 'subtype=' || rg.rngsubtype::regtype,
           'multirange=' || rg.rngmultitypid::regtype, 'subtype_opclass=' || format('%%I.%%I', n.nspname, oc.opcname),
           'collation=' || nullif(rg.rngcollation, 0)::regcollation,
           'canonical=' || rg.rngcanonical::oid::regprocedure, 'subtype_diff=' || rg.rngsubdiff::oid::regprocedure)
       FROM ({_TYPES}) t
       JOIN pg_range rg ON rg.rngtypid = t.oid
       JOIN pg_opclass oc ON oc.oid = rg.rngsubopc JOIN pg_namespace n ON n.oid = oc.opcnamespace""",
    # operators, operator classes and families, casts, access methods
    f"""SELECT 'operator', o.oid::regoperator::text, x.item, x.text
       FROM pg_operator o JOIN ({_MEMBERS}) m ON m.classid = 'pg_operator'::regclass AND m.objid = o.oid
       CROSS JOIN LATERAL (VALUES
           ('def', concat_ws(' ', 'function=' || o.oprcode::oid::regprocedure, 'result=' || o.oprresult::regtype,
               'commutator=' || nullif(o.oprcom, 0)::regoperator, 'negator=' || nullif(o.oprnegate, 0)::regoperator,
               'restrict=' || o.oprrest::oid::regprocedure, 'join=' || o.oprjoin::oid::regprocedure,
               'merges=' || o.oprcanmerge, 'hashes=' || o.oprcanhash)),
           ('comment', obj_description(o.oid, 'pg_operator'))
       ) AS x(item, text)""",
    f"""SELECT 'operator class', format('%%I.%%I using %%I', n.nspname, oc.opcname, am.amname), 'def', concat_ws(' ',
           'for type ' || oc.opcintype::regtype, CASE WHEN oc.opcdefault THEN 'default' END,
           'family ' || format('%%I.%%I', fn.nspname, f.opfname), 'storage ' || nullif(oc.opckeytype, 0)::regtype)
       FROM pg_opclass oc JOIN ({_MEMBERS}) m ON m.classid = 'pg_opclass'::regclass AND m.objid = oc.oid
       JOIN pg_namespace n ON n.oid = oc.opcnamespace JOIN pg_am am ON am.oid = oc.opcmethod
       JOIN pg_opfamily f ON f.oid = oc.opcfamily JOIN pg_namespace fn ON fn.oid = f.opfnamespace""",
    f"""WITH fams AS (
           SELECT objid AS oid FROM ({_MEMBERS}) m WHERE classid = 'pg_opfamily'::regclass
           UNION SELECT oc.opcfamily FROM pg_opclass oc
               JOIN ({_MEMBERS}) m ON m.classid = 'pg_opclass'::regclass AND m.objid = oc.oid)
       SELECT 'operator family', format('%%I.%%I using %%I', n.nspname, f.opfname, am.amname), x.item, x.text
       FROM fams JOIN pg_opfamily f ON f.oid = fams.oid JOIN pg_namespace n ON n.oid = f.opfnamespace
       JOIN pg_am am ON am.oid = f.opfmethod
       CROSS JOIN LATERAL (
           SELECT 'operator ' || lpad(ao.amopstrategy::text, 3, '0') || ' ' || ao.amopopr::regoperator,
               concat_ws(' ', '(' || ao.amoplefttype::regtype || ', ' || ao.amoprighttype::regtype || ')',
                   CASE ao.amoppurpose WHEN 'o' THEN 'for order by ' || format('%%I.%%I', sn.nspname, sf.opfname) END)
           FROM pg_amop ao LEFT JOIN pg_opfamily sf ON sf.oid = ao.amopsortfamily
           LEFT JOIN pg_namespace sn ON sn.oid = sf.opfnamespace
           WHERE ao.amopfamily = f.oid
           UNION ALL
           SELECT 'function ' || lpad(ap.amprocnum::text, 3, '0') || ' ' || ap.amproc::oid::regprocedure,
               '(' || ap.amproclefttype::regtype || ', ' || ap.amprocrighttype::regtype || ')'
           FROM pg_amproc ap WHERE ap.amprocfamily = f.oid
       ) AS x(item, text)""",
    f"""SELECT 'cast', format('(%%s AS %%s)', c.castsource::regtype, c.casttarget::regtype), 'def', concat_ws(' ',
           CASE c.castmethod WHEN 'f' THEN 'with function ' || c.castfunc::regprocedure
               WHEN 'i' THEN 'with inout' ELSE 'without function' END,
           CASE c.castcontext WHEN 'a' THEN 'as assignment' WHEN 'i' THEN 'as implicit' END)
       FROM pg_cast c JOIN ({_MEMBERS}) m ON m.classid = 'pg_cast'::regclass AND m.objid = c.oid""",
    f"""SELECT 'access method', quote_ident(a.amname), 'def', concat_ws(' ', 'type ' || a.amtype::text,
           'handler ' || a.amhandler::oid::regprocedure)
       FROM pg_am a JOIN ({_MEMBERS}) m ON m.classid = 'pg_am'::regclass AND m.objid = a.oid""",
    # schemas, event triggers, anything else
    f"""SELECT 'schema', quote_ident(n.nspname), x.item, x.text
       FROM pg_namespace n JOIN ({_MEMBERS}) m ON m.classid = 'pg_namespace'::regclass AND m.objid = n.oid
       CROSS JOIN LATERAL (VALUES
           ('acl', coalesce(n.nspacl::text, '(default)')),
           ('comment', obj_description(n.oid, 'pg_namespace'))
       ) AS x(item, text)""",
    f"""SELECT 'event trigger', quote_ident(e.evtname), 'def', concat_ws(' ', 'on ' || e.evtevent,
           'when tag in ' || e.evttags::text, 'execute ' || e.evtfoid::regprocedure, 'enabled ' || e.evtenabled::text)
       FROM pg_event_trigger e JOIN ({_MEMBERS}) m ON m.classid = 'pg_event_trigger'::regclass AND m.objid = e.oid""",
    f"""SELECT 'other', pg_describe_object(m.classid, m.objid, 0), 'member', m.classid::regclass::text
       FROM ({_MEMBERS}) m WHERE m.classid NOT IN ('pg_proc'::regclass, 'pg_class'::regclass, 'pg_type'::regclass,
           'pg_operator'::regclass, 'pg_opclass'::regclass, 'pg_opfamily'::regclass, 'pg_cast'::regclass,
           'pg_am'::regclass, 'pg_namespace'::regclass, 'pg_event_trigger'::regclass)""",
]


def schema_snapshot(conn, extname="pg_feedback"):
    """Sorted lines 'KIND NAME ITEM: TEXT' describing every object the extension owns and their parts (columns,
    constraints, indexes, triggers, policies, ACLs, comments, definitions); free of oids and of the version."""
    ext_oid, _ = _extension(conn, extname)
    settings = {"search_path": "pg_catalog", "TimeZone": "UTC", "DateStyle": "ISO, YMD", "extra_float_digits": "3"}
    entries = []
    with conn.transaction():
        saved = {s: conn.execute("SELECT current_setting(%s)", (s,)).fetchone()[0] for s in settings}
        for setting, value in settings.items():
            conn.execute("SELECT set_config(%s, %s, true)", (setting, value))
        for query in _QUERIES:
            for kind, name, item, text in conn.execute(query, {"ext": ext_oid}).fetchall():
                if text is None:
                    continue
                lines = [line.rstrip() for line in text.rstrip().split("\n")]
                entries.extend((kind, name, item, i, line) for i, line in enumerate(lines))
        for setting, value in saved.items():
            conn.execute("SELECT set_config(%s, %s, true)", (setting, value))
    entries.sort()
    return [f"{kind} {name} {item}: {line}".rstrip() for kind, name, item, _, line in entries]


def schema_diff(conn_a, conn_b, extname="pg_feedback"):
    """Unified diff of the two databases' schema snapshots of the extension; '' when identical."""
    a, b = schema_snapshot(conn_a, extname), schema_snapshot(conn_b, extname)
    if a == b:
        return ""
    return "\n".join(difflib.unified_diff(a, b, conn_a.info.dbname, conn_b.info.dbname, lineterm=""))
