-- Least-privilege role for the matcher worker (`matcher run` / `matcher backfill`).
--
-- Run it as the owner of the tables (the role that applied sql/0001_*.sql,
-- sql/0002_*.sql, ... via `matcher migrate`), connected to the matcher database:
--
--   psql "$OWNER_URL" -v worker_role=matcher_worker -f sql/roles/worker_role.sql
--
-- psql variables (all optional):
--   worker_role  the worker's role name               (default matcher_worker)
--   schema       the schema holding the tables        (default public)
--   app_role     the application's role: see "The profiles trigger" below
--
-- It is idempotent and declarative: it creates the role when missing, revokes
-- every table and sequence privilege the role has in the schema, then grants
-- exactly the list below, in one transaction. Run it again after every
-- migration (a new table is not granted by default on purpose).
--
-- The role is created NOLOGIN, with no password: nothing secret is in this
-- file. To let the worker log in, once, as a superuser or CREATEROLE role:
--   ALTER ROLE matcher_worker LOGIN;
--   \password matcher_worker          -- psql prompts; the password never hits a log
-- (or keep it NOLOGIN and GRANT it to a login role, or use certificate auth).
-- An existing role's LOGIN/password are left as they are.
--
-- What the worker may do (shared/spec/runs.md):
--   read         profiles, saved_filters, blocks (the app's tables)
--   read, insert, update, delete   notifications (+ notifications' identity; delete:
--                the retention sweep forgets sent notifications older than --retention-days)
--   read, insert, update, delete   filter_matches (delete: the retention sweep
--                forgets pairs older than --retention-days), and its bookkeeping:
--                matcher_profile_changes, matcher_runs (+ identity),
--                matcher_shard_progress, matcher_invalid_filters,
--                matcher_filter_state, matcher_waiting_matches, matcher_quarantine,
--                matcher_bulk_matches
--   read, insert, update   matcher_service_state (the notification pause: runs read
--                it; on-call pauses and resumes with the job's own credentials)
--   CONNECT on the database (no run creates a temporary table), USAGE on the schema.
-- Not granted because `matcher run` does not use it: matcher_schema_migrations
-- (read by `matcher migrate`, which runs as the owner).
-- What it may not: CREATE in the schema or database, DDL of any kind,
-- TRUNCATE of notifications, TRUNCATE of matches, any write to the app's tables, any
-- other table. Run locks are advisory locks, which need no privilege.
--
-- The profiles triggers: their functions (matcher_record_changed_profile(),
-- matcher_record_inserted_profiles() and matcher_record_deleted_profiles(), installed by `matcher migrate`) are SECURITY
-- DEFINER, owned by the NOLOGIN role matcher_capture, so the app's role needs no grant on worker tables. On a
-- database migrated only to 0002, pass -v app_role=NAME and this script grants
-- the app role what the trigger needs (nothing once the function is
-- SECURITY DEFINER).

\set ON_ERROR_STOP on
\if :{?worker_role}
\else
\set worker_role matcher_worker
\endif
\if :{?schema}
\else
\set schema public
\endif

BEGIN;

-- The role: created when missing, NOLOGIN and without any special attribute.
SELECT format('CREATE ROLE %I NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT',
              :'worker_role')
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'worker_role')
\gexec

-- Refuse to manage a role that bypasses privileges anyway (an error aborts
-- the transaction and psql exits non-zero). BYPASSRLS is allowed: it bypasses
-- row-level security, not privileges, and a worker must read the app's tables
-- whole (its sessions turn row_security off, so a policy makes its reads fail
-- rather than hide rows; deploy/README.md, "The worker role").
SELECT format('DO $refuse$ BEGIN RAISE EXCEPTION %L; END $refuse$',
              format('role %s is a superuser: refusing to use it as the worker role', rolname))
  FROM pg_roles
 WHERE rolname = :'worker_role' AND rolsuper
\gexec

-- Database and schema.
SELECT format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), :'worker_role')
\gexec
SELECT format('REVOKE CREATE ON SCHEMA %I FROM %I', :'schema', :'worker_role')
\gexec
SELECT format('GRANT USAGE ON SCHEMA %I TO %I', :'schema', :'worker_role')
\gexec

-- Start from nothing in this schema, so that a privilege removed from this
-- file is removed from the role on the next run.
SELECT format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM %I', :'schema', :'worker_role')
\gexec
SELECT format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM %I', :'schema', :'worker_role')
\gexec

-- Tables. A missing table is an error (run the migrations first).
SELECT format('GRANT %s ON TABLE %I.%I TO %I', g.privileges, :'schema', g.tbl, :'worker_role')
  FROM (VALUES
        ('profiles',                'SELECT'),
        ('saved_filters',           'SELECT'),
        ('blocks',                  'SELECT'),
        ('filter_matches',          'SELECT, INSERT, UPDATE, DELETE'),
        ('matcher_waiting_matches', 'SELECT, INSERT, UPDATE, DELETE'),
        ('matcher_bulk_matches',    'SELECT, INSERT, UPDATE, DELETE'),
        ('notifications',           'SELECT, INSERT, UPDATE, DELETE'),
        ('matcher_profile_changes', 'SELECT, INSERT, UPDATE, DELETE'),
        ('matcher_runs',            'SELECT, INSERT, UPDATE, DELETE'),
        ('matcher_shard_progress',  'SELECT, INSERT, UPDATE, DELETE'),
        ('matcher_invalid_filters', 'SELECT, INSERT, UPDATE, DELETE'),
        ('matcher_filter_state',    'SELECT, INSERT, UPDATE, DELETE'),
        ('matcher_service_state',   'SELECT, INSERT, UPDATE'),
        ('matcher_quarantine',      'SELECT, INSERT, UPDATE, DELETE')
       ) AS g(tbl, privileges)
\gexec

-- Identity sequences of the tables the worker inserts into (nextval needs USAGE).
SELECT format('GRANT USAGE ON SEQUENCE %s TO %I', s.seq, :'worker_role')
  FROM (VALUES ('notifications'), ('matcher_runs')) AS t(tbl),
       LATERAL (SELECT pg_get_serial_sequence(format('%I.%I', :'schema', t.tbl), 'id') AS seq) AS s
 WHERE s.seq IS NOT NULL
\gexec

-- The app role and the profiles trigger (see the header).
\if :{?app_role}
SELECT format('GRANT SELECT, INSERT, UPDATE ON TABLE %I.matcher_profile_changes TO %I',
              :'schema', :'app_role')
 WHERE NOT (SELECT p.prosecdef
              FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = :'schema' AND p.proname = 'matcher_record_changed_profile')
\gexec
\endif

COMMIT;
