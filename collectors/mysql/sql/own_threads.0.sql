/* dbdiag */
-- dbdiag's own connections, by the program_name connection attribute it gives them (diag.db.OWN_PREFIX):
-- the wait sampler leaves them out. performance_schema ON only (its session_connect_attrs).
SELECT PROCESSLIST_ID AS id
FROM performance_schema.session_connect_attrs
WHERE ATTR_NAME = 'program_name' AND LEFT(ATTR_VALUE, CHAR_LENGTH(%(prefix)s)) = %(prefix)s
