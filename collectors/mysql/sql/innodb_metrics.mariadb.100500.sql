/* dbdiag */ SELECT NAME AS name, `COUNT` AS value
FROM information_schema.INNODB_METRICS
WHERE ENABLED = 1
  AND (NAME LIKE 'log%' OR NAME LIKE 'os_log%' OR NAME LIKE '%fsync%')
