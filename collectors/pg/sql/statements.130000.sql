-- pg_stat_statements counters of this database without query texts (extension 1.8+, times
-- in ms). {schema} is the extension's schema, quoted by the caller. Rows of the same statement at
-- different nesting levels (toplevel, 14+) are summed. queryid is NULL for other roles' statements
-- when the role lacks pg_read_all_stats.
SELECT s.queryid::text AS queryid, s.userid::regrole::text AS role,
       sum(s.calls) AS calls, sum(s.total_exec_time) AS total_exec_time,
       sum(s.total_plan_time) AS total_plan_time, sum(s.rows) AS rows,
       sum(s.shared_blks_hit) AS shared_blks_hit, sum(s.shared_blks_read) AS shared_blks_read,
       sum(s.shared_blks_dirtied) AS shared_blks_dirtied, sum(s.shared_blks_written) AS shared_blks_written,
       sum(s.temp_blks_read) AS temp_blks_read, sum(s.temp_blks_written) AS temp_blks_written,
       sum(s.wal_records) AS wal_records, sum(s.wal_fpi) AS wal_fpi, sum(s.wal_bytes) AS wal_bytes
  FROM {schema}.pg_stat_statements(false) s
 WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND s.queryid IS NOT NULL
 GROUP BY s.queryid, s.userid
