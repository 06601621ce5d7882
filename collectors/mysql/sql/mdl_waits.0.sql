/* dbdiag */
-- Pending metadata locks (LOCK TABLES, DDL, a table a transaction has touched) with the threads that hold
-- a granted lock on the same object: performance_schema.metadata_locks, MySQL 5.7+ and MariaDB 10.5+, with
-- the wait/lock/metadata/sql/mdl instrument on. A holder of a compatible lock on the object is listed too.
SELECT tw.PROCESSLIST_ID AS pid, th.PROCESSLIST_ID AS blocker, w.LOCK_TYPE AS wanted,
       h.LOCK_TYPE AS held, w.OBJECT_TYPE AS object_type,
       CONCAT_WS('.', w.OBJECT_SCHEMA, w.OBJECT_NAME) AS object
FROM performance_schema.metadata_locks w
JOIN performance_schema.threads tw ON tw.THREAD_ID = w.OWNER_THREAD_ID
LEFT JOIN performance_schema.metadata_locks h
  ON h.OBJECT_TYPE = w.OBJECT_TYPE AND h.OBJECT_SCHEMA <=> w.OBJECT_SCHEMA AND h.OBJECT_NAME <=> w.OBJECT_NAME
 AND h.LOCK_STATUS = 'GRANTED' AND h.OWNER_THREAD_ID <> w.OWNER_THREAD_ID
LEFT JOIN performance_schema.threads th ON th.THREAD_ID = h.OWNER_THREAD_ID
WHERE w.LOCK_STATUS = 'PENDING'
