-- pg_stat_wal, PostgreSQL 14-17 (times in ms, zero unless track_wal_io_timing is on).
SELECT pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()
                            ELSE pg_current_wal_lsn() END, '0/0') AS "wal.lsn_bytes",
       wal_records AS "wal.wal_records", wal_fpi AS "wal.wal_fpi", wal_bytes AS "wal.wal_bytes",
       wal_buffers_full AS "wal.wal_buffers_full", wal_write AS "wal.wal_write", wal_sync AS "wal.wal_sync",
       wal_write_time AS "wal.wal_write_time", wal_sync_time AS "wal.wal_sync_time"
  FROM pg_stat_wal
