/* dbdiag */
-- Whether performance_schema records metadata locks (metadata_locks is empty without this instrument).
SELECT ENABLED AS enabled FROM performance_schema.setup_instruments
WHERE NAME = 'wait/lock/metadata/sql/mdl'
