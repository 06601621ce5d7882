-- pg_stat_statements of this database per statement and role, summed over nesting levels (toplevel, 14+),
-- times in ms, with the statement's text when %(texts)s (reads the extension's text file: the end of a step
-- only). {schema}: the extension's schema, quoted by the caller. queryid is NULL for other roles' statements
-- when the role lacks pg_read_all_stats: those are left out.
SELECT s.queryid::text || '|' || s.userid::regrole::text AS key,
       sum(s.calls) AS calls, sum(s.total_exec_time) AS total_ms, sum(s.total_plan_time) AS plan_ms,
       sum(s.rows) AS rows,
       sum(s.shared_blks_hit) AS shared_blks_hit, sum(s.shared_blks_read) AS shared_blks_read,
       sum(s.shared_blks_dirtied) AS shared_blks_dirtied, sum(s.shared_blks_written) AS shared_blks_written,
       sum(s.temp_blks_read) AS temp_blks_read, sum(s.temp_blks_written) AS temp_blks_written,
       min(left(s.query, %(max_chars)s)) AS text
  FROM {schema}.pg_stat_statements(%(texts)s) s
 WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND s.queryid IS NOT NULL
 GROUP BY s.queryid, s.userid
