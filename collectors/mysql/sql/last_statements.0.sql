/* dbdiag */
-- The current or last statement of some threads (an idle blocker's processlist INFO is empty):
-- performance_schema.events_statements_current, consumer events_statements_current on.
SELECT t.PROCESSLIST_ID AS pid, LEFT(s.SQL_TEXT, 200) AS statement
FROM performance_schema.threads t
JOIN performance_schema.events_statements_current s ON s.THREAD_ID = t.THREAD_ID
WHERE FIND_IN_SET(t.PROCESSLIST_ID, %(pids)s) AND s.SQL_TEXT IS NOT NULL
