/* dbdiag */ SELECT CONCAT('prepared|', MD5(p.SQL_TEXT)) AS `key`, SUM(p.COUNT_EXECUTE) AS calls,
       SUM(p.SUM_TIMER_EXECUTE) / 1000000000 AS total_ms, SUM(p.SUM_ROWS_SENT + p.SUM_ROWS_AFFECTED) AS `rows`,
       SUM(p.SUM_ROWS_EXAMINED) AS rows_examined, SUM(p.SUM_NO_INDEX_USED) AS no_index_used,
       LEFT(MIN(p.SQL_TEXT), 2000) AS text, GROUP_CONCAT(DISTINCT t.PROCESSLIST_USER) AS users
  FROM performance_schema.prepared_statements_instances p
  LEFT JOIN performance_schema.threads t ON t.THREAD_ID = p.OWNER_THREAD_ID
 GROUP BY p.SQL_TEXT
