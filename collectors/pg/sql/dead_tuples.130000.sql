-- Dead row versions not yet removed, summed over this database's tables (a gauge: VACUUM lowers it).
SELECT coalesce(sum(n_dead_tup), 0)::bigint AS dead FROM pg_stat_user_tables
