/* dbdiag */
-- Granted table metadata locks per thread from MariaDB's metadata_lock_info plugin (INSTALL SONAME
-- 'metadata_lock_info'): where performance_schema does not record metadata locks, the holders of a lock on
-- a table a waiting statement names.
SELECT THREAD_ID AS pid, LOCK_MODE AS mode, TABLE_SCHEMA AS db, TABLE_NAME AS name
FROM information_schema.METADATA_LOCK_INFO
WHERE LOCK_TYPE = 'Table metadata lock'
