-- What the connected role may see: superuser, or the privileges of the monitoring roles.
SELECT r.rolsuper AS superuser,
       pg_has_role(current_user, 'pg_monitor', 'USAGE') AS pg_monitor,
       pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') AS pg_read_all_stats,
       pg_has_role(current_user, 'pg_read_all_settings', 'USAGE') AS pg_read_all_settings,
       current_user AS role, current_database() AS database
  FROM pg_roles r
 WHERE r.rolname = current_user
