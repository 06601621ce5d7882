-- The watched database's own counters (pg_stat_database: readable by any role) and its client sessions
-- now, dbdiag's own (application_name dbdiag:...) and this one left out. Transactions = commits + rollbacks.
-- PostgreSQL 13 has no session time counters: busy_ms is NULL.
SELECT d.xact_commit + d.xact_rollback AS transactions, NULL::float8 AS busy_ms,
       (SELECT count(*) FROM pg_stat_activity a
         WHERE a.datid = d.datid AND a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()
           AND coalesce(a.application_name, '') NOT LIKE %(own)s) AS sessions,
       (SELECT count(*) FROM pg_stat_activity a
         WHERE a.datid = d.datid AND a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()
           AND coalesce(a.application_name, '') NOT LIKE %(own)s AND a.state IS NOT NULL
           AND a.state <> 'idle') AS busy,
       -- other roles' sessions without pg_read_all_stats: their database, type and state are all NULL
       (SELECT count(*) FROM pg_stat_activity a
         WHERE a.backend_type IS NULL AND a.datid IS NULL AND a.pid <> pg_backend_pid()) AS hidden
  FROM pg_stat_database d WHERE d.datname = current_database()
