-- The client ports of the server's TCP client sessions (this one left out), and whether each is a workload
-- session of the watched database (dbdiag's own, application_name dbdiag:..., are not). A local process whose
-- connection is one of the others is not a client of this database. Other roles' sessions without
-- pg_read_all_stats show no port: their processes cannot be told apart and count as the watched load's.
SELECT a.client_port AS port,
       (a.datname = current_database() AND coalesce(a.application_name, '') NOT LIKE %(own)s) AS here
  FROM pg_stat_activity a
 WHERE a.client_port IS NOT NULL AND a.client_port > 0 AND a.backend_type = 'client backend'
   AND a.pid <> pg_backend_pid()
