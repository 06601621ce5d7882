"""The TPC-C-like workload: its tables, client-side program and stored-procedure mode."""
