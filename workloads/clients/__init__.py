"""The database clients a workload drives: the contract, the per-engine clients, portable SQL."""
