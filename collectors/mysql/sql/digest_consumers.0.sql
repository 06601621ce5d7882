/* dbdiag */ SELECT @@performance_schema AS ps,
       (SELECT ENABLED FROM performance_schema.setup_consumers WHERE NAME = 'statements_digest') AS digest,
       (SELECT ENABLED FROM performance_schema.setup_consumers WHERE NAME = 'events_statements_history') AS history
