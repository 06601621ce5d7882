-- Lock requests waiting right now, per lock type (pg_locks; visible to every role).
SELECT locktype, count(*) AS waiting
  FROM pg_locks
 WHERE NOT granted
 GROUP BY locktype
