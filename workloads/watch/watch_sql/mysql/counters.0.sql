-- The server's global statement and transaction counters (any role may read them). Global: every database
-- and every session, dbdiag's own included (its statements are autocommit SELECTs and SHOWs: never a COMMIT).
SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_commit', 'Com_rollback', 'Com_select', 'Com_insert',
  'Com_update', 'Com_delete', 'Com_replace', 'Com_insert_select', 'Com_replace_select', 'Com_update_multi',
  'Com_delete_multi', 'Com_call_procedure', 'Com_load', 'Questions', 'Threads_connected', 'Threads_running')
