#!/usr/bin/env bash
# The default database and its login role: the role owns the database, may create databases
# (pytest-django makes test_<database>) and is not a superuser, so the web server, workers and
# collector never hold superuser rights. Idempotent. On a machine set up before the role
# existed, the tables, sequences, views and functions postgres owned there (and its test
# databases) are handed to the role. Connects as the postgres superuser on 127.0.0.1.
# Usage: scripts/setup_database.sh [role] [database]   (both default to switchyard)
set -euo pipefail

role=${1:-switchyard}
db=${2:-switchyard}
admin=(psql -h 127.0.0.1 -U postgres -v ON_ERROR_STOP=1 -qtA -v "role=$role" -v "db=$db")

"${admin[@]}" -d postgres <<'SQL'
SELECT format('CREATE ROLE %I LOGIN', :'role')
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('ALTER ROLE %I LOGIN CREATEDB NOSUPERUSER NOCREATEROLE NOREPLICATION NOBYPASSRLS',
              :'role') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'role')
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
SELECT format('ALTER DATABASE %I OWNER TO %I', datname, :'role') FROM pg_database
 WHERE datname = :'db' OR datname = 'test_' || :'db'
    OR starts_with(datname, 'test_' || :'db' || '_gw') \gexec
SQL

# Objects an older set-up created as postgres (migrations run as the superuser).
"${admin[@]}" -d "$db" <<'SQL'
SELECT format('ALTER %s %I.%I OWNER TO %I',
              CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                             WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
              n.nspname, c.relname, :'role')
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
   AND n.nspname NOT LIKE 'pg\_%'
   AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
   AND pg_get_userbyid(c.relowner) = 'postgres'
   -- a column's own sequence follows its table
   AND NOT EXISTS (SELECT 1 FROM pg_depend d
                    WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                      AND d.deptype IN ('a', 'i'))
 ORDER BY c.relkind = 'S' \gexec
SELECT format('ALTER FUNCTION %s OWNER TO %I', p.oid::regprocedure, :'role')
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
   AND n.nspname NOT LIKE 'pg\_%'
   AND pg_get_userbyid(p.proowner) = 'postgres' \gexec
SELECT format('ALTER SCHEMA %I OWNER TO %I', nspname, :'role') FROM pg_namespace
 WHERE nspname NOT IN ('pg_catalog', 'information_schema') AND nspname NOT LIKE 'pg\_%'
   AND pg_get_userbyid(nspowner) = 'postgres' \gexec
SQL
