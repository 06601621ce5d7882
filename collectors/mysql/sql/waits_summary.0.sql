/* dbdiag */ SELECT EVENT_NAME AS event, COUNT_STAR AS count, SUM_TIMER_WAIT AS sum_ps
FROM performance_schema.events_waits_summary_global_by_event_name
WHERE COUNT_STAR > 0
