"""Workloads and the multi-client driver.

``driver`` (run_sweep, validate, DriverOptions) is the entry point; one module per workload family here
(``sysbench``, ``pgbench``, ``insert``, ``custom``; ``tpcc/``), with ``base`` (what a workload is),
``load`` (creates and fills tables) and ``hist`` (latency histograms). ``steps/`` runs one step (the
client pool, the client process's loop, merging); ``clients/`` talks to the servers; ``native/`` is the
native executor and its program language; ``remote/`` spreads a step over Dask workers; ``watch/`` is
``dbdiag watch``'s side (a load command we start and watch, the server's own counters).
"""
