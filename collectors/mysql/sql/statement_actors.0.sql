/* dbdiag */ SELECT USER AS user, SUM(COUNT_STAR) AS calls
  FROM performance_schema.events_statements_summary_by_user_by_event_name
 WHERE USER IS NOT NULL
 GROUP BY USER
