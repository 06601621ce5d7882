-- Every setting this role may see (pg_settings hides superuser-only ones, such as
-- data_directory, from roles without pg_read_all_settings).
SELECT name, setting, unit, source, boot_val, reset_val, context, pending_restart
  FROM pg_settings
 ORDER BY name
