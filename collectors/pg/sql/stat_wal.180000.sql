-- PostgreSQL 18: pg_stat_wal lost wal_write/wal_sync and their times; they are the
-- object = 'wal' rows of pg_stat_io now. Context 'normal' is what pg_stat_wal used to count (XLogWrite
-- writes, issue_xlog_fsync syncs); 'init' is the writing and syncing of newly created WAL segments.
SELECT pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()
                            ELSE pg_current_wal_lsn() END, '0/0') AS "wal.lsn_bytes",
       w.wal_records AS "wal.wal_records", w.wal_fpi AS "wal.wal_fpi", w.wal_bytes AS "wal.wal_bytes",
       w.wal_buffers_full AS "wal.wal_buffers_full",
       io.writes AS "wal.wal_write", io.fsyncs AS "wal.wal_sync",
       io.write_time AS "wal.wal_write_time", io.fsync_time AS "wal.wal_sync_time",
       io.write_bytes AS "wal.wal_write_bytes",
       io.init_writes AS "wal.init_write", io.init_fsyncs AS "wal.init_sync"
  FROM pg_stat_wal w,
       (SELECT sum(writes) FILTER (WHERE context = 'normal') AS writes,
               sum(fsyncs) FILTER (WHERE context = 'normal') AS fsyncs,
               sum(write_time) FILTER (WHERE context = 'normal') AS write_time,
               sum(fsync_time) FILTER (WHERE context = 'normal') AS fsync_time,
               sum(write_bytes) FILTER (WHERE context = 'normal') AS write_bytes,
               sum(writes) FILTER (WHERE context = 'init') AS init_writes,
               sum(fsyncs) FILTER (WHERE context = 'init') AS init_fsyncs
          FROM pg_stat_io WHERE object = 'wal') io
