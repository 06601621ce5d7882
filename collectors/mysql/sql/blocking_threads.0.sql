/* dbdiag */
-- Every thread but this one, with its statement's first 200 characters: the blocking sampler finds
-- metadata and table lock waits by their state ("Waiting for table metadata lock") and describes the
-- blockers. TIME is whole seconds on MySQL.
SELECT ID AS id, USER AS user, HOST AS host, COMMAND AS command, TIME * 1000 AS time_ms,
       STATE AS state, LEFT(INFO, 200) AS info
FROM information_schema.PROCESSLIST
WHERE ID <> CONNECTION_ID()
