-- pg_stat_database, PostgreSQL 14-17: adds the session statistics (times in ms).
SELECT 'db' AS scope, numbackends, xact_commit, xact_rollback, blks_read, blks_hit,
       tup_returned, tup_fetched, tup_inserted, tup_updated, tup_deleted, conflicts,
       temp_files, temp_bytes, deadlocks, checksum_failures, blk_read_time, blk_write_time,
       session_time, active_time, idle_in_transaction_time, sessions, sessions_abandoned,
       sessions_fatal, sessions_killed
  FROM pg_stat_database WHERE datname = current_database()
UNION ALL
SELECT 'alldb', sum(numbackends), sum(xact_commit), sum(xact_rollback), sum(blks_read), sum(blks_hit),
       sum(tup_returned), sum(tup_fetched), sum(tup_inserted), sum(tup_updated), sum(tup_deleted), sum(conflicts),
       sum(temp_files), sum(temp_bytes), sum(deadlocks), sum(checksum_failures), sum(blk_read_time),
       sum(blk_write_time), sum(session_time), sum(active_time), sum(idle_in_transaction_time), sum(sessions),
       sum(sessions_abandoned), sum(sessions_fatal), sum(sessions_killed)
  FROM pg_stat_database
