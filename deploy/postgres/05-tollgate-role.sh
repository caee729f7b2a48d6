#!/bin/sh
# Runs once, when the postgres volume is first initialised (the image
# sources *.sh here in name order, before 10-grafana-reader.sql): the
# ordinary role Tollgate connects as, owner of $POSTGRES_DB. Not a
# superuser: the ledger's integrity rests on its triggers (append-only
# entries, events and prices; TRUNCATE refused), which a superuser can
# switch off (SET session_replication_role = replica, DISABLE TRIGGER ALL)
# and the owner cannot. Owning the database is all the migrations and the
# ledger need (they create tables, functions, triggers and the monthly
# partitions in its public schema). The password is TOLLGATE_DB_PASSWORD
# from the postgres service's environment, passed as a psql variable so
# that it is quoted as a literal.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
	-v tollgate_password="$TOLLGATE_DB_PASSWORD" <<SQL
CREATE ROLE tollgate LOGIN PASSWORD :'tollgate_password' NOSUPERUSER NOCREATEDB NOCREATEROLE;
ALTER DATABASE "$POSTGRES_DB" OWNER TO tollgate;
SQL
