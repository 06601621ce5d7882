-- The session of this database whose snapshot (backend_xmin) is oldest, other than our own: what holds back
-- VACUUM's cleanup of this database's tables (a backend of another database does not, except replication).
-- Other roles' sessions show their pid and times only without pg_read_all_stats: user and query come back NULL.
SELECT pid, usename AS "user", coalesce(client_addr::text, 'local') AS client, state, application_name,
       extract(epoch FROM now() - xact_start)::float8 AS xact_age_s,
       extract(epoch FROM now() - state_change)::float8 AS state_age_s,
       age(backend_xmin)::bigint AS xmin_age, left(query, 2000) AS query
  FROM pg_stat_activity
 WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
   AND datname = current_database() AND backend_type = 'client backend'
 ORDER BY xact_start LIMIT 1
