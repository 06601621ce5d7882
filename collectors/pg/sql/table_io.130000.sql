-- Per-table buffer reads (from outside shared_buffers) and hits, heap and indexes (pg_statio_user_tables), and
-- each table's size with its indexes and TOAST (bytes): how much of the pool its reads would need. Any role.
SELECT t.schemaname || '.' || t.relname AS table, t.heap_blks_read, t.heap_blks_hit,
       coalesce(t.idx_blks_read, 0) AS idx_blks_read, coalesce(t.idx_blks_hit, 0) AS idx_blks_hit,
       pg_total_relation_size(t.relid) AS bytes
  FROM pg_statio_user_tables t
