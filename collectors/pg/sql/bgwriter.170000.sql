-- pg_stat_bgwriter, PostgreSQL 17+: checkpoint columns moved to pg_stat_checkpointer, backend
-- writes and fsyncs to pg_stat_io.
SELECT buffers_clean AS "bgwriter.buffers_clean", maxwritten_clean AS "bgwriter.maxwritten_clean",
       buffers_alloc AS "bgwriter.buffers_alloc"
  FROM pg_stat_bgwriter
