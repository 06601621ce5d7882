-- Per-table scan counters of this database (pg_stat_user_tables) and the table's size as the planner knows
-- it (pg_class), to tell how many rows a sequential scan reads. Any role may read them.
SELECT t.schemaname || '.' || t.relname AS table, t.seq_scan, t.seq_tup_read,
       coalesce(t.idx_scan, 0) AS idx_scan, coalesce(t.idx_tup_fetch, 0) AS idx_tup_fetch,
       t.n_tup_ins, t.n_tup_upd, t.n_tup_del, t.n_live_tup, c.relpages, c.reltuples
  FROM pg_stat_user_tables t JOIN pg_class c ON c.oid = t.relid
