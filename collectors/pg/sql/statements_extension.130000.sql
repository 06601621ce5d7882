-- Is pg_stat_statements installed in this database, in which schema, which version.
SELECT n.nspname AS schema, e.extversion AS version
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
 WHERE e.extname = 'pg_stat_statements'
