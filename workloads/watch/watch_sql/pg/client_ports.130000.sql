-- The server's client sessions for telling the watched load's processes from the rest (one read a window):
-- port: a TCP session's client port (NULL over a unix socket, or another role's without pg_read_all_stats);
-- here: a workload session of the watched database (dbdiag's own, application_name dbdiag:..., are not);
-- own: a session of dbdiag's (this one included), whose backend's CPU is the watch's cost on the server.
-- A local process whose connection is a session of another database is not a client of this one; other
-- roles' sessions that show no port cannot be told apart and count as the watched load's.
SELECT a.client_port AS port, a.pid,
       (a.datname = current_database() AND coalesce(a.application_name, '') NOT LIKE %(own)s
        AND a.pid <> pg_backend_pid()) AS here,
       (coalesce(a.application_name, '') LIKE %(own)s OR a.pid = pg_backend_pid()) AS own
  FROM pg_stat_activity a
 WHERE a.backend_type = 'client backend'
