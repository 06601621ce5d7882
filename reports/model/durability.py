"""Durability verdicts: do the settings make commits durable, and are the measured rates possible?

Pure functions, no I/O: the report calls them with numbers read from the run
bundle, so re-rendering an old run gives the same verdict.

Two questions, kept apart, each in its own module and both named here:

* :func:`settings_verdict` (:mod:`reports.model.durability_settings`) - what the
  server's settings promise. A setting that was not collected is "unknown",
  never assumed to be at its default.
* :func:`plausibility_verdict` (:mod:`reports.model.durability_plausibility`) -
  whether the measured commit rate could have been produced by a server that
  really flushes each commit, given what the disk can do (F, from
  :mod:`collectors.fsync_test`), how often the server called fsync/fdatasync (S)
  and how many flushes the device completed (D).

The physical argument (seed 004, R. Haas / G. Smith): a commit that waits for
its WAL/redo to reach stable storage needs a flush; one flush takes 1/F s; with
c clients, group commit can merge at most c waiting commits into one flush (each
client has at most one commit in flight). So C <= F * c, and C <= S * c.
"""

from __future__ import annotations

from reports.model.durability_plausibility import (
    ABOUT_ZERO_FRACTION,
    ABOUT_ZERO_PER_S,
    DEVICE_ABOUT_ZERO_FRACTION,
    DEVICE_ABOUT_ZERO_PER_S,
    FLUSH_CALLS_MARGIN,
    FLUSH_CAPACITY_MARGIN,
    Check,
    PlausibilityVerdict,
    plausibility_verdict,
)
from reports.model.durability_settings import RelaxedSetting, SettingsVerdict, settings_verdict

__all__ = [
    "ABOUT_ZERO_FRACTION", "ABOUT_ZERO_PER_S", "DEVICE_ABOUT_ZERO_FRACTION", "DEVICE_ABOUT_ZERO_PER_S",
    "FLUSH_CALLS_MARGIN", "FLUSH_CAPACITY_MARGIN", "Check", "PlausibilityVerdict", "RelaxedSetting",
    "SettingsVerdict", "plausibility_verdict", "settings_verdict",
]
