-- Every released version installs and updates to the next, in the style of pg_stat_statements' oldextversions:
-- CREATE EXTENSION at the oldest released version (the base install script), then ALTER EXTENSION ... UPDATE TO
-- each version in turn, each step's objects listed by \dx+. At the end, the updated extension owns the same
-- objects as a fresh install of the current version (survive.py compares their definitions too).
SET client_min_messages = warning;
DROP DATABASE IF EXISTS fb_oldext;
DROP DATABASE IF EXISTS fb_fresh;
CREATE DATABASE fb_oldext;
CREATE DATABASE fb_fresh;
\c fb_oldext
SET client_min_messages = warning;
CREATE EXTENSION vector;
CREATE EXTENSION pg_feedback VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'pg_feedback';
\dx+ pg_feedback
ALTER EXTENSION pg_feedback UPDATE TO '0.2.0';
SELECT extversion FROM pg_extension WHERE extname = 'pg_feedback';
\dx+ pg_feedback
ALTER EXTENSION pg_feedback UPDATE TO '0.3.0';
SELECT extversion FROM pg_extension WHERE extname = 'pg_feedback';
\dx+ pg_feedback
ALTER EXTENSION pg_feedback UPDATE TO '0.4.0';
SELECT extversion FROM pg_extension WHERE extname = 'pg_feedback';
\dx+ pg_feedback
ALTER EXTENSION pg_feedback UPDATE TO '0.5.0';
SELECT extversion FROM pg_extension WHERE extname = 'pg_feedback';
\dx+ pg_feedback
ALTER EXTENSION pg_feedback UPDATE TO '0.6.0';
SELECT extversion FROM pg_extension WHERE extname = 'pg_feedback';
\dx+ pg_feedback
ALTER EXTENSION pg_feedback UPDATE TO '0.7.0';
SELECT extversion FROM pg_extension WHERE extname = 'pg_feedback';
\dx+ pg_feedback
ALTER EXTENSION pg_feedback UPDATE TO '0.8.0';
SELECT extversion FROM pg_extension WHERE extname = 'pg_feedback';
\dx+ pg_feedback
ALTER EXTENSION pg_feedback UPDATE TO '0.9.0';
SELECT extversion FROM pg_extension WHERE extname = 'pg_feedback';
\dx+ pg_feedback
ALTER EXTENSION pg_feedback UPDATE TO '0.10.0';
SELECT extversion FROM pg_extension WHERE extname = 'pg_feedback';
\dx+ pg_feedback
ALTER EXTENSION pg_feedback UPDATE TO '0.11.0';
SELECT extversion FROM pg_extension WHERE extname = 'pg_feedback';
\dx+ pg_feedback
ALTER EXTENSION pg_feedback UPDATE TO '0.12.0';
SELECT extversion FROM pg_extension WHERE extname = 'pg_feedback';
\dx+ pg_feedback
-- The current version is the default one: a plain UPDATE has nothing left to do.
ALTER EXTENSION pg_feedback UPDATE;
SELECT extversion = default_version AS at_default FROM pg_extension
  JOIN pg_available_extensions ON name = extname WHERE extname = 'pg_feedback';
CREATE TEMP VIEW extension_objects AS
SELECT md5(string_agg(o, E'\n' ORDER BY o)) AS objects, count(*) AS n
  FROM (SELECT pg_describe_object(classid, objid, objsubid) AS o FROM pg_depend
         WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
           AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_feedback')) e;
SELECT objects, n FROM extension_objects \gset updated_
\c fb_fresh
SET client_min_messages = warning;
CREATE EXTENSION pg_feedback CASCADE;
SELECT md5(string_agg(o, E'\n' ORDER BY o)) = :'updated_objects' AS fresh_install_owns_the_same_objects,
       count(*) = :updated_n AS as_many
  FROM (SELECT pg_describe_object(classid, objid, objsubid) AS o FROM pg_depend
         WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
           AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_feedback')) e;
\c postgres
SET client_min_messages = warning;
DROP DATABASE fb_oldext;
DROP DATABASE fb_fresh;
