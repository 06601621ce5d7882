-- PostgreSQL 13 has no pg_stat_wal: only the WAL position (bytes since 0/0) is known.
SELECT pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()
                            ELSE pg_current_wal_lsn() END, '0/0') AS "wal.lsn_bytes"
