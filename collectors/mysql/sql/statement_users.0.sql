/* dbdiag */ SELECT CONCAT(c.DIGEST, '|', IFNULL(c.CURRENT_SCHEMA, '')) AS `key`, t.PROCESSLIST_USER AS user
  FROM performance_schema.events_statements_current c
  JOIN performance_schema.threads t ON t.THREAD_ID = c.THREAD_ID
 WHERE c.DIGEST IS NOT NULL AND t.PROCESSLIST_USER IS NOT NULL
UNION ALL
SELECT CONCAT(h.DIGEST, '|', IFNULL(h.CURRENT_SCHEMA, '')), t.PROCESSLIST_USER
  FROM performance_schema.events_statements_history h
  JOIN performance_schema.threads t ON t.THREAD_ID = h.THREAD_ID
 WHERE h.DIGEST IS NOT NULL AND t.PROCESSLIST_USER IS NOT NULL
