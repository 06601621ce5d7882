-- pg_stat_io, PostgreSQL 16+: operation counts per backend type, object and context. A NULL
-- cell is an operation that combination never does (not a zero). In 16/17 each read, write and extend
-- is one block (op_bytes); from 18 a read may cover several blocks (see read_bytes), so counts are
-- operations, not blocks.
SELECT backend_type, object, context, reads, writes, extends, hits, fsyncs
  FROM pg_stat_io
