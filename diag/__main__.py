"""``python -m diag`` runs the dbdiag command."""

import sys

from diag.cli import main

sys.exit(main())
