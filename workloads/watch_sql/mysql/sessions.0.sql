-- Client sessions now, this one and the server's own threads left out; busy = running a statement that is
-- not one of dbdiag's catalog reads (they carry its marker). dbdiag's idle sessions cannot be told
-- apart here without performance_schema, so only busy sessions are a workload's for sure.
SELECT count(*) AS sessions,
       coalesce(sum(COMMAND <> 'Sleep' AND LOCATE('/* dbdiag */', coalesce(INFO, '')) = 0), 0) AS busy
  FROM information_schema.PROCESSLIST
 WHERE ID <> CONNECTION_ID() AND USER NOT IN ('system user', 'event_scheduler') AND COMMAND <> 'Daemon'
