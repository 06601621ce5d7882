/* dbdiag */ SELECT t.PROCESSLIST_ID AS id, t.PROCESSLIST_USER AS user, t.PROCESSLIST_COMMAND AS command,
       t.PROCESSLIST_STATE AS state, LEFT(t.PROCESSLIST_INFO, 16) AS info,
       w.EVENT_NAME AS wait_event, w.EVENT_ID AS wait_id
FROM performance_schema.threads t
LEFT JOIN performance_schema.events_waits_current w
       ON w.THREAD_ID = t.THREAD_ID AND w.END_EVENT_ID IS NULL
WHERE t.TYPE = 'FOREGROUND' AND t.PROCESSLIST_ID IS NOT NULL AND t.PROCESSLIST_ID <> CONNECTION_ID()
