/* dbdiag */ SELECT CONCAT(IFNULL(DIGEST, ''), '|', IFNULL(SCHEMA_NAME, '')) AS `key`, COUNT_STAR AS calls,
       SUM_TIMER_WAIT / 1000000000 AS total_ms, SUM_ROWS_SENT + SUM_ROWS_AFFECTED AS `rows`,
       SUM_ROWS_EXAMINED AS rows_examined, SUM_NO_INDEX_USED AS no_index_used, LEFT(DIGEST_TEXT, 2000) AS text
  FROM performance_schema.events_statements_summary_by_digest
