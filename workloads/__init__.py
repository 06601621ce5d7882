"""Workloads and the multi-client driver.

``driver`` (run_sweep, validate, DriverOptions) is the entry point; ``loop`` is the
client process; ``client`` and ``mylib`` talk to the servers; ``load`` creates and
fills tables; one module per workload family (``sysbench``, ``pgbench``,
``insert``, ``tpcc``, ``custom``); ``hist`` merges latency histograms.
"""
