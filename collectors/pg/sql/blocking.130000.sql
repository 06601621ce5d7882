-- Sessions of this database waiting for a heavyweight lock right now, each with every session
-- pg_blocking_pids() names as blocking it (one row per pair; a waiter with no blocker seen comes once,
-- blocker NULL), and what the blocker is doing. pg_blocking_pids runs only for the waiters: it takes the
-- lock manager's locks, so it must not run for every backend at 10 Hz. pg_stat_activity is one snapshot per
-- statement, so waiter and blocker rows agree. Other roles' sessions show no state or query without
-- pg_read_all_stats (pg_monitor).
SELECT w.pid, extract(epoch FROM clock_timestamp() - w.query_start) AS query_s,
       b.pid AS blocker, b.usename AS b_user, b.application_name AS b_app, host(b.client_addr) AS b_addr,
       b.state AS b_state, b.wait_event_type AS b_wait_type, b.wait_event AS b_wait,
       left(b.query, 200) AS b_query, b.backend_type AS b_type,
       extract(epoch FROM clock_timestamp() - b.xact_start) AS b_xact_s,
       extract(epoch FROM clock_timestamp() - b.state_change) AS b_state_s
  FROM pg_stat_activity w
  LEFT JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS bp(pid) ON true
  LEFT JOIN pg_stat_activity b ON b.pid = bp.pid
 WHERE w.wait_event_type = 'Lock'
   AND w.pid <> pg_backend_pid()
   AND (%(all_databases)s OR w.datname = current_database())
