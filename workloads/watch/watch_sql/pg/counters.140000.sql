-- The watched database's own counters (pg_stat_database: readable by any role) and its client sessions
-- now, dbdiag's own (application_name dbdiag:...) and this one left out. Transactions = commits + rollbacks;
-- busy_ms = time its sessions spent running statements or idle inside a transaction (14+, ms).
SELECT d.xact_commit + d.xact_rollback AS transactions, d.active_time + d.idle_in_transaction_time AS busy_ms,
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
