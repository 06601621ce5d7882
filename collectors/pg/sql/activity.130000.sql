-- One wait-event sample of the workload's sessions: client backends other than dbdiag's own (their
-- application_name starts with diag.db.OWN_PREFIX) and those the run leaves out by name, grouped by state
-- and wait event. Sessions of other roles show NULL state and backend type unless this role has
-- pg_read_all_stats; they are counted as "hidden" (autovacuum workers of this database among them).
-- lock_pids: who waits for a heavyweight lock (collectors/lockgate.py opens on a session waiting at two ticks).
SELECT CASE WHEN a.state IS NULL THEN 'hidden' ELSE a.state END AS state,
       a.wait_event_type, a.wait_event, count(*) AS n,
       CASE WHEN a.wait_event_type = 'Lock' THEN array_agg(a.pid) END AS lock_pids
  FROM pg_stat_activity a
 WHERE a.pid <> pg_backend_pid()
   AND (a.backend_type = 'client backend' OR (a.backend_type IS NULL AND a.usesysid IS NOT NULL))
   AND NOT starts_with(coalesce(a.application_name, ''), %(own_prefix)s)
   AND coalesce(a.application_name, '') <> ALL (%(exclude)s)
   AND (%(all_databases)s OR a.datname = current_database())
 GROUP BY 1, 2, 3
