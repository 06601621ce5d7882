/* dbdiag */ SELECT t.trx_mysql_thread_id AS pid, p.USER AS user, p.HOST AS client, p.COMMAND AS state,
       '' AS application_name, TIMESTAMPDIFF(MICROSECOND, t.trx_started, NOW(6)) / 1e6 AS xact_age_s,
       p.TIME AS state_age_s, NULL AS xmin_age, LEFT(p.INFO, 2000) AS query
FROM information_schema.INNODB_TRX t LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
WHERE t.trx_mysql_thread_id <> CONNECTION_ID()
ORDER BY t.trx_started LIMIT 1
