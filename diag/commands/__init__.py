"""Subcommands beyond ``run``/``report``/``server``: each module has ``add_parsers(sub)`` and ``dispatch(args)``.

``dispatch`` returns the exit code, or None when the command is not that module's.
"""
