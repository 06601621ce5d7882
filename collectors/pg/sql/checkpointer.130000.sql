-- Checkpoint counters, PostgreSQL 13-16: still part of pg_stat_bgwriter; named as in 17's
-- pg_stat_checkpointer so a report reads one set of names (times in ms).
SELECT checkpoints_timed AS "checkpointer.num_timed", checkpoints_req AS "checkpointer.num_requested",
       checkpoint_write_time AS "checkpointer.write_time", checkpoint_sync_time AS "checkpointer.sync_time",
       buffers_checkpoint AS "checkpointer.buffers_written"
  FROM pg_stat_bgwriter
