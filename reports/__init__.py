"""Reports from a run bundle alone: ``model/`` (what is computed) -> ``rules/`` (findings) -> ``views/`` (what is shown)."""
