/* dbdiag */
-- InnoDB row and table lock waits on MySQL 8.0+: performance_schema.data_lock_waits and data_locks
-- (threads map their thread ids to processlist ids), with the transactions from INNODB_TRX. Needs SELECT
-- on performance_schema and PROCESS. Not run here: no MySQL 8 server on the test machine.
SELECT rt.PROCESSLIST_ID AS pid, bt.PROCESSLIST_ID AS blocker,
       TIMESTAMPDIFF(MICROSECOND, r.trx_wait_started, NOW(6)) / 1e6 AS wait_s,
       rl.LOCK_MODE AS wanted, rl.LOCK_TYPE AS lock_type,
       CONCAT_WS('.', rl.OBJECT_SCHEMA, rl.OBJECT_NAME) AS lock_table, rl.INDEX_NAME AS lock_index,
       bl.LOCK_MODE AS held,
       TIMESTAMPDIFF(MICROSECOND, b.trx_started, NOW(6)) / 1e6 AS b_xact_s, b.trx_state AS b_trx_state,
       LEFT(b.trx_query, 200) AS b_query
FROM performance_schema.data_lock_waits w
JOIN performance_schema.threads rt ON rt.THREAD_ID = w.REQUESTING_THREAD_ID
JOIN performance_schema.threads bt ON bt.THREAD_ID = w.BLOCKING_THREAD_ID
LEFT JOIN performance_schema.data_locks rl ON rl.ENGINE_LOCK_ID = w.REQUESTING_ENGINE_LOCK_ID
LEFT JOIN performance_schema.data_locks bl ON bl.ENGINE_LOCK_ID = w.BLOCKING_ENGINE_LOCK_ID
LEFT JOIN information_schema.INNODB_TRX r ON r.trx_id = w.REQUESTING_ENGINE_TRANSACTION_ID
LEFT JOIN information_schema.INNODB_TRX b ON b.trx_id = w.BLOCKING_ENGINE_TRANSACTION_ID
