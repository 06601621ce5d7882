"""``python -m diag`` runs the dbdiag command."""

from diag.cli import entry

entry()
