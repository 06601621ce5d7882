/* dbdiag */ SELECT NAME AS name, `COUNT` AS value
FROM information_schema.INNODB_METRICS
WHERE STATUS = 'enabled'
  AND (NAME LIKE 'log%' OR NAME LIKE 'os_log%' OR NAME LIKE '%fsync%')
