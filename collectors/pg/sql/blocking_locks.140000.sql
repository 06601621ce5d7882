-- What the waiters of one sample want and what their blockers hold on the same object (pg_locks, read once
-- per sample and only when someone waits). waitstart (PostgreSQL 14+) dates each wait; a tuple lock the
-- waiter already holds names the table of a row-lock (transactionid) wait.
WITH l AS MATERIALIZED (
  SELECT pid, locktype, mode, granted, database, relation, page, tuple, virtualxid, transactionid, classid,
         objid, objsubid, waitstart
    FROM pg_locks
   WHERE pid = ANY (%(pids)s)
), here AS (SELECT oid FROM pg_database WHERE datname = current_database())
SELECT w.pid, w.locktype, w.mode,
       CASE WHEN w.database = (SELECT oid FROM here) THEN w.relation::regclass::text ELSE w.relation::text END
         AS relation,
       w.transactionid::text AS xid,
       extract(epoch FROM clock_timestamp() - w.waitstart) AS wait_s,
       (SELECT t.relation::regclass::text FROM l t
         WHERE t.pid = w.pid AND t.granted AND t.locktype = 'tuple' AND t.database = (SELECT oid FROM here)
         LIMIT 1) AS tuple_relation,
       h.pid AS holder, h.mode AS held
  FROM l w
  LEFT JOIN l h ON h.granted AND h.pid <> w.pid AND h.locktype = w.locktype
       AND h.database IS NOT DISTINCT FROM w.database AND h.relation IS NOT DISTINCT FROM w.relation
       AND h.page IS NOT DISTINCT FROM w.page AND h.tuple IS NOT DISTINCT FROM w.tuple
       AND h.virtualxid IS NOT DISTINCT FROM w.virtualxid AND h.transactionid IS NOT DISTINCT FROM w.transactionid
       AND h.classid IS NOT DISTINCT FROM w.classid AND h.objid IS NOT DISTINCT FROM w.objid
       AND h.objsubid IS NOT DISTINCT FROM w.objsubid
 WHERE NOT w.granted
