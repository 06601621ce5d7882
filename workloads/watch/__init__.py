"""``dbdiag watch``: the load command we start and watch, the watched server's counters, the window's row."""
