/* dbdiag */
-- InnoDB row and table lock waits: each waiting thread with the thread whose transaction blocks it, the
-- lock wanted and held, and the blocker's transaction (INNODB_LOCK_WAITS, INNODB_LOCKS, INNODB_TRX: one
-- cache InnoDB refreshes at most every 100 ms, needs PROCESS). MySQL 5.7: 8.0 moved the lock tables to
-- performance_schema (lock_waits.mysql.80000.sql).
SELECT r.trx_mysql_thread_id AS pid, b.trx_mysql_thread_id AS blocker,
       TIMESTAMPDIFF(MICROSECOND, r.trx_wait_started, NOW(6)) / 1e6 AS wait_s,
       rl.lock_mode AS wanted, rl.lock_type AS lock_type, rl.lock_table AS lock_table,
       rl.lock_index AS lock_index, bl.lock_mode AS held,
       TIMESTAMPDIFF(MICROSECOND, b.trx_started, NOW(6)) / 1e6 AS b_xact_s, b.trx_state AS b_trx_state,
       LEFT(b.trx_query, 200) AS b_query
FROM information_schema.INNODB_LOCK_WAITS w
JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id
JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id
LEFT JOIN information_schema.INNODB_LOCKS rl ON rl.lock_id = w.requested_lock_id
LEFT JOIN information_schema.INNODB_LOCKS bl ON bl.lock_id = w.blocking_lock_id
