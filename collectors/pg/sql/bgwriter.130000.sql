-- pg_stat_bgwriter, PostgreSQL 13-16 (the checkpoint columns are read by checkpointer.130000.sql).
SELECT buffers_clean AS "bgwriter.buffers_clean", maxwritten_clean AS "bgwriter.maxwritten_clean",
       buffers_alloc AS "bgwriter.buffers_alloc", buffers_backend AS "bgwriter.buffers_backend",
       buffers_backend_fsync AS "bgwriter.buffers_backend_fsync"
  FROM pg_stat_bgwriter
