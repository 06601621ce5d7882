-- pg_stat_checkpointer, PostgreSQL 18: adds num_done and slru_written (times in ms).
SELECT num_timed AS "checkpointer.num_timed", num_requested AS "checkpointer.num_requested",
       num_done AS "checkpointer.num_done",
       restartpoints_timed AS "checkpointer.restartpoints_timed",
       restartpoints_req AS "checkpointer.restartpoints_req",
       restartpoints_done AS "checkpointer.restartpoints_done",
       write_time AS "checkpointer.write_time", sync_time AS "checkpointer.sync_time",
       buffers_written AS "checkpointer.buffers_written", slru_written AS "checkpointer.slru_written"
  FROM pg_stat_checkpointer
