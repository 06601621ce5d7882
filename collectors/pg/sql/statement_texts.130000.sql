-- Texts of the chosen statements (reads pg_stat_statements' text file once; end of run only).
SELECT DISTINCT ON (s.queryid) s.queryid::text AS queryid, left(s.query, %(max_chars)s) AS query
  FROM {schema}.pg_stat_statements(true) s
 WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND s.queryid::text = ANY(%(ids)s)
