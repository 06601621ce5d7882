/* dbdiag */ SELECT CONCAT('prepared|', MD5(SQL_TEXT)) AS `key`, SUM(COUNT_EXECUTE) AS calls,
       SUM(SUM_TIMER_EXECUTE) / 1000000000 AS total_ms, SUM(SUM_ROWS_SENT) AS `rows`,
       SUM(SUM_ROWS_EXAMINED) AS rows_examined, SUM(SUM_NO_INDEX_USED) AS no_index_used,
       LEFT(MIN(SQL_TEXT), 2000) AS text
  FROM performance_schema.prepared_statements_instances
 GROUP BY SQL_TEXT
