/* dbdiag */ SHOW GLOBAL VARIABLES WHERE Variable_name IN (
  'innodb_flush_log_at_trx_commit', 'innodb_flush_log_at_timeout', 'sync_binlog', 'log_bin', 'binlog_format',
  'binlog_group_commit_sync_delay', 'innodb_doublewrite', 'innodb_flush_method', 'innodb_use_native_aio',
  'innodb_buffer_pool_size', 'innodb_buffer_pool_instances', 'innodb_redo_log_capacity', 'innodb_log_file_size',
  'innodb_log_files_in_group', 'innodb_log_buffer_size', 'innodb_log_writer_threads', 'innodb_dedicated_server',
  'innodb_io_capacity', 'innodb_io_capacity_max', 'innodb_flush_neighbors',
  'performance_schema', 'thread_handling', 'innodb_thread_concurrency', 'innodb_spin_wait_delay',
  'max_connections', 'version', 'version_comment')
