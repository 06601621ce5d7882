/* dbdiag */ SELECT LOWER(vi.VARIABLE_NAME) AS name, gv.VARIABLE_VALUE AS value, NULL AS default_value,
       vi.VARIABLE_SOURCE AS origin
FROM performance_schema.variables_info vi
JOIN performance_schema.global_variables gv ON gv.VARIABLE_NAME = vi.VARIABLE_NAME
WHERE vi.VARIABLE_SOURCE <> 'COMPILED'
ORDER BY vi.VARIABLE_NAME
