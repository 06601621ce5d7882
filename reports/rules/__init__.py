"""Findings rules, one module per family; :data:`reports.rules.findings.RULES` lists them explicitly.

* :mod:`reports.rules.durability` - durability_unsafe, durability_implausible
* :mod:`reports.rules.waits` - lock_contention, latch_contention, commit_flush_bound, io_read_bound
* :mod:`reports.rules.cpu` - cpu_parse_plan, cpu_bound, context_switch_storm, host_contention
* :mod:`reports.rules.client` - client_bound
* :mod:`reports.rules.limit` - step_limit (every step names its limit, from reports.model.accounting)
* :mod:`reports.rules.symptoms` - the wait rules and cpu_bound as findings.RULES lists them: re-stated against
  the step's limit (share of transaction time; the limit's detail, or queueing / a part beside it)
* :mod:`reports.rules.checkpoints` - checkpoint_pressure
* :mod:`reports.rules.lost` - server_lost
* :mod:`reports.rules.churn` - connection_churn
* :mod:`reports.rules.watch` - client_server_disagree (``dbdiag watch -- CMD``)

Shared pieces: the Finding record, the steps, the records in a step's window and the evidence numbers are in
:mod:`reports.model.steps` (the model reads them too), CPU use in :mod:`reports.model.cpu`, the wait profile and
its thresholds in :mod:`reports.model.wait_profiles`; the impact scale and the counters over a window in
:mod:`reports.rules.base`.
"""
