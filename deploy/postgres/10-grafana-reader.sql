-- Runs once, when the postgres volume is first initialised: a read-only role
-- for Grafana. Tables made later (by `tollgate migrate`, and the monthly
-- usage_events partitions made by the ledger) are made by tollgate, the role
-- Tollgate connects as (05-tollgate-role.sh): its default privileges give
-- the reader SELECT on them. The password is the demo's: change it for real
-- use (ALTER ROLE grafana_reader PASSWORD '...') along with
-- GRAFANA_DB_PASSWORD.
CREATE ROLE grafana_reader LOGIN PASSWORD 'grafana-reader' NOSUPERUSER NOCREATEDB NOCREATEROLE;
GRANT USAGE ON SCHEMA public TO grafana_reader;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO grafana_reader;
ALTER DEFAULT PRIVILEGES FOR ROLE tollgate IN SCHEMA public GRANT SELECT ON TABLES TO grafana_reader;
