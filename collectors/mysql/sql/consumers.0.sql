/* dbdiag */ SELECT NAME AS name, ENABLED AS enabled
FROM performance_schema.setup_consumers
