/* dbdiag */ SELECT trx_mysql_thread_id AS id, trx_state AS state
FROM information_schema.INNODB_TRX
