/* dbdiag */ SELECT CONCAT(DIGEST, '|', IFNULL(CURRENT_SCHEMA, '')) AS `key`, LEFT(SQL_TEXT, 2000) AS text
  FROM performance_schema.events_statements_history
 WHERE DIGEST IS NOT NULL AND SQL_TEXT IS NOT NULL
