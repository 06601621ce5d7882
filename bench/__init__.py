"""Benchmarks against pgbench and sysbench (see BENCHMARKS.md)."""
