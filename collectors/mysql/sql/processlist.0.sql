/* dbdiag */ SELECT ID AS id, USER AS user, COMMAND AS command, STATE AS state, LEFT(INFO, 16) AS info,
       NULL AS wait_event, NULL AS wait_id
FROM information_schema.PROCESSLIST
WHERE ID <> CONNECTION_ID()
