-- Client sessions now, read by workloads.watch_counters (this one and the server's own threads left out there;
-- busy = running a statement that is not one of dbdiag's catalog reads, which carry its marker). dbdiag's idle
-- sessions cannot be told apart here without performance_schema, so only busy sessions are a workload's for
-- sure. SHOW PROCESSLIST, not information_schema.PROCESSLIST: MariaDB fills the latter into an on-disk
-- temporary table at every read (twice a second here), and it added Handler_read_rnd_next, Select_scan and
-- Created_tmp_disk_tables to the server-wide counters the scans and spills rules read.
SHOW PROCESSLIST
