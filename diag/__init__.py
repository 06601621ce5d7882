"""dbdiag: profile and diagnose PostgreSQL and MySQL/MariaDB under the same workloads."""

__version__ = "0.1.0"
