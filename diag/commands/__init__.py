"""The commands' bodies: each module defines ``main(args, argv) -> int`` (the exit code).

The parsers live in :mod:`diag.cli`, which imports a command's module only when
that command runs (``diag.cli.COMMANDS``), so ``dbdiag --help`` and an argument
error load none of reports, collectors or workloads.
"""
