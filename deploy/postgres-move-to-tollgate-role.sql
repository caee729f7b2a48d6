-- Run once, as the superuser, in Tollgate's database, to hand a ledger that
-- Tollgate made as the superuser (the compose stack of an earlier release:
-- deploy/postgres/ runs only on an empty volume) to the ordinary role
-- tollgate, which must exist already (docs/operations.md, "Postgres role"):
--
--   docker compose stop tollgate-gateway tollgate-meter tollgate-admin
--   docker compose exec -T postgres psql -U postgres -d tollgate -v ON_ERROR_STOP=1 \
--     < deploy/postgres-move-to-tollgate-role.sql
--
-- It gives the role the database and every table (each month's partition
-- too, attached or detached), function and type of the public schema;
-- indexes and identity sequences follow their tables. The triggers stay as
-- they are. It runs in one transaction: it changes all or nothing.
BEGIN;
DO $$
DECLARE
    obj text;
BEGIN
    EXECUTE format('ALTER DATABASE %I OWNER TO tollgate', current_database());
    FOR obj IN SELECT c.oid::regclass::text FROM pg_class c
            WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
              AND c.relowner <> 'tollgate'::regrole LOOP
        EXECUTE format('ALTER TABLE %s OWNER TO tollgate', obj);
    END LOOP;
    -- Views, and sequences of no table (Tollgate makes none; an operator may have).
    FOR obj IN SELECT c.oid::regclass::text FROM pg_class c
            WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('v', 'm', 'S')
              AND c.relowner <> 'tollgate'::regrole
              AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                  AND d.deptype IN ('a', 'i')) LOOP
        EXECUTE format('ALTER TABLE %s OWNER TO tollgate', obj);
    END LOOP;
    FOR obj IN SELECT p.oid::regprocedure::text FROM pg_proc p
            WHERE p.pronamespace = 'public'::regnamespace AND p.proowner <> 'tollgate'::regrole LOOP
        EXECUTE format('ALTER ROUTINE %s OWNER TO tollgate', obj);
    END LOOP;
    -- Composite types of tables went with them; standalone types here.
    FOR obj IN SELECT t.oid::regtype::text FROM pg_type t
            WHERE t.typnamespace = 'public'::regnamespace AND t.typowner <> 'tollgate'::regrole
              AND t.typrelid = 0 AND t.typelem = 0 LOOP
        EXECUTE format('ALTER TYPE %s OWNER TO tollgate', obj);
    END LOOP;
    -- Grafana's reader (deploy/postgres/10-grafana-reader.sql) keeps
    -- SELECT on these tables, and gets it on those the role makes later.
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'grafana_reader') THEN
        ALTER DEFAULT PRIVILEGES FOR ROLE tollgate IN SCHEMA public GRANT SELECT ON TABLES TO grafana_reader;
    END IF;
END;
$$;
COMMIT;
