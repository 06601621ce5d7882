"""Plausibility verdict: could a server that flushes every commit have produced these rates?

Pure functions, no I/O. The inputs: the measured commit rate C, the client count
c, what the disk can do (F, from :mod:`collectors.fsync_test`), how often the
server called fsync/fdatasync (S) and how many flushes the device completed (D).

The physical argument (seed 004, R. Haas / G. Smith): a commit that waits for
its WAL/redo to reach stable storage needs a flush; one flush takes 1/F s; with
c clients, group commit can merge at most c waiting commits into one flush (each
client has at most one commit in flight). So C <= F * c, and C <= S * c.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from diag.core.errors import DiagError

# --------------------------------------------------------------------------- margins

# F comes from a short fsync test (2 s per method by default) on a disk that may be
# shared or virtual; run-to-run spread of flush rates there is commonly tens of
# percent, and a commit's WAL write is not exactly the test's 8 kB. A 1.5x margin
# keeps that noise from ever calling an honest server implausible, while real
# violations are off by whole factors (seed 004: turning synchronous_commit off
# made the same run 75x faster).
FLUSH_CAPACITY_MARGIN = 1.5

# S is counted over the same window as C but by a different tool (strace/perf/eBPF
# or server counters) whose window edges do not line up exactly with C's, and
# background flushes (checkpoints, doublewrite) only add to S. The same 1.5x
# margin on S * c absorbs the edge effects.
FLUSH_CALLS_MARGIN = 1.5

# "About zero" flush calls: below 1% of the commit rate AND below 1 per second.
# A durable server flushes at least once per commit group, so S >= C / c, which is
# above 1% of C for any c <= 100 clients; and any live server flushes its log in
# the background about once a second or more (PostgreSQL's WAL writer, InnoDB's
# master thread), so a rate below 1/s means the flushes are not happening (or not
# being seen). Requiring both avoids false alarms at very low commit rates (C=0.5/s
# legitimately gives S=0.5/s) and at very large client counts.
ABOUT_ZERO_FRACTION = 0.01
ABOUT_ZERO_PER_S = 1.0

# "About zero" device flushes against the server's flush calls: below 1% of S AND
# below 1 per second. The block layer merges flush requests that wait at the same
# time, so D may be well below S, but not 100-fold; 1/s is under the floor a busy
# filesystem with a write-back disk produces on its own (journal commits).
DEVICE_ABOUT_ZERO_FRACTION = 0.01
DEVICE_ABOUT_ZERO_PER_S = 1.0

Numbers = dict[str, "float | int | bool | str | None"]


@dataclass(frozen=True)
class Check:
    """One comparison: ``status`` "passed", "failed" or "not_checked"; ``formula`` with numbers filled in."""

    name: str
    status: str
    formula: str
    reason: str


@dataclass(frozen=True)
class PlausibilityVerdict:
    """Could a server that flushes every commit have produced these numbers?

    ``status``: "implausible" (a check failed: the commits cannot all have been
    flushed), "plausible" (every check that could run passed) or "cannot_tell"
    (no check could run). ``formula`` shows each comparison made, with its numbers;
    ``numbers`` holds every input and derived value; ``not_checked`` names the checks
    that lacked an input, with why in ``checks``. ``group_commit_factor`` = C / S,
    commits per flush call (None when S is unknown or 0).
    """

    status: str
    reason: str
    formula: str
    numbers: dict[str, float | int | bool | str | None]
    checks: list[Check]
    not_checked: list[str]
    group_commit_factor: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "status": self.status, "reason": self.reason, "formula": self.formula, "numbers": dict(self.numbers),
            "checks": [asdict(ch) for ch in self.checks], "not_checked": list(self.not_checked),
            "group_commit_factor": self.group_commit_factor,
        }


def _g(x: float) -> str:
    return f"{x:.4g}" if abs(x) < 1e4 else f"{x:.0f}"


def plausibility_verdict(C: float, c: int, F: float | None, S: float | None, D: float | None,
                         local_block_device: bool, settings_durable: bool | None,
                         *, write_cache: str | None = None) -> PlausibilityVerdict:
    """Judge measured rates against what flushing every commit allows.

    C: committed write transactions per second. c: concurrent clients (>= 1).
    F: flush capability of the disk, ops/s (fdatasync, one 8 kB write), or None.
    S: flush system calls (fsync/fdatasync/O_DSYNC writes) per second by the server, or None.
    D: flush requests per second completed by the data's block device, or None.
    local_block_device: the WAL/redo is on a local block device (so D means something).
    settings_durable: the settings make each commit wait for a flush
    (:attr:`SettingsVerdict.commit_waits_for_flush`); None when unknown.
    write_cache: the device's queue/write_cache; "write through" means the kernel
    sends no flushes, so D ~ 0 is expected and that check is skipped.

    Checks, in order (the first failure gives the reason):

    1. flush_capacity: C <= F * c * FLUSH_CAPACITY_MARGIN (needs F, settings durable).
    2. flush_calls_present: not (C > 0 and S about 0) (needs S, settings durable).
    3. flush_calls_cover_commits: C <= S * c * FLUSH_CALLS_MARGIN (needs S, settings durable).
    4. device_sees_flushes: not (S > 0 and D about 0) (needs S, D, local block device,
       write-back cache). Runs whatever the settings: flush calls that never reach
       the device are a storage problem either way.
    """
    if C is None or C < 0:
        raise DiagError(f"plausibility verdict: commit rate must be >= 0, got {C}")
    if c is None or c < 1:
        raise DiagError(f"plausibility verdict: client count must be >= 1, got {c}")
    numbers: Numbers = {
        "C": C, "c": c, "F": F, "S": S, "D": D, "local_block_device": local_block_device,
        "settings_durable": settings_durable, "write_cache": write_cache,
        "flush_capacity_margin": FLUSH_CAPACITY_MARGIN, "flush_calls_margin": FLUSH_CALLS_MARGIN,
    }
    not_durable_why = ("settings let commits return before a flush, so flush rates do not bound them"
                       if settings_durable is False else
                       "not known whether settings make commits wait for a flush")
    checks = [_flush_capacity(C, c, F, settings_durable, not_durable_why, numbers),
              *_flush_calls(C, c, S, settings_durable, not_durable_why, numbers),
              _device_sees_flushes(S, D, local_block_device, write_cache, numbers)]
    return _verdict(C, S, checks, numbers)


def _flush_capacity(C: float, c: int, F: float | None, settings_durable: bool | None, not_durable_why: str,
                    numbers: Numbers) -> Check:
    """Check 1: the disk's flush rate bounds commits."""
    name = "flush_capacity"
    if F is None:
        return Check(name, "not_checked", "C <= F x c x margin", "F (flush capability) not measured")
    if settings_durable is not True:
        return Check(name, "not_checked", "C <= F x c x margin", not_durable_why)
    limit = F * c * FLUSH_CAPACITY_MARGIN
    numbers["F_c_margin"] = limit
    formula = (f"C <= F x c x {FLUSH_CAPACITY_MARGIN}: {_g(C)} <= {_g(F)} x {c} x "
               f"{FLUSH_CAPACITY_MARGIN} = {_g(limit)}")
    if C > limit:
        return Check(name, "failed", formula, (
            f"{_g(C)} commits/s is more than {c} client(s) can get from a disk that completes "
            f"{_g(F)} flushes/s, even if every flush carried one commit from each client "
            f"({_g(limit)}/s with margin): the commits cannot all have been flushed."))
    return Check(name, "passed", formula, "Within what the disk's flush rate allows.")


def _flush_calls(C: float, c: int, S: float | None, settings_durable: bool | None, not_durable_why: str,
                 numbers: Numbers) -> list[Check]:
    """Checks 2 and 3: the server's flush calls are there, and enough for the commits."""
    if S is None or settings_durable is not True:
        why = "S (server flush calls) not measured" if S is None else not_durable_why
        return [Check("flush_calls_present", "not_checked", "not (C > 0 and S ~ 0)", why),
                Check("flush_calls_cover_commits", "not_checked", "C <= S x c x margin", why)]
    out: list[Check] = []
    s_zero_limit = min(ABOUT_ZERO_FRACTION * C, ABOUT_ZERO_PER_S)
    numbers["S_about_zero_below"] = s_zero_limit
    about_zero = S < ABOUT_ZERO_FRACTION * C and S < ABOUT_ZERO_PER_S
    formula = (f"not (C > 0 and S < min({ABOUT_ZERO_FRACTION:g} x C, {ABOUT_ZERO_PER_S:g}/s)): "
               f"C = {_g(C)}, S = {_g(S)}, threshold {_g(s_zero_limit)}")
    if C > 0 and about_zero:
        out.append(Check("flush_calls_present", "failed", formula, (
            f"The server committed {_g(C)} transactions/s but made about no flush calls ({_g(S)}/s): "
            "commits are not being flushed, whatever the settings say.")))
    else:
        out.append(Check("flush_calls_present", "passed", formula, "The server does call fsync/fdatasync."))
    limit = S * c * FLUSH_CALLS_MARGIN
    numbers["S_c_margin"] = limit
    formula = (f"C <= S x c x {FLUSH_CALLS_MARGIN}: {_g(C)} <= {_g(S)} x {c} x "
               f"{FLUSH_CALLS_MARGIN} = {_g(limit)}")
    if C > limit:
        out.append(Check("flush_calls_cover_commits", "failed", formula, (
            f"{_g(C)} commits/s with {_g(S)} flush calls/s is {_g(C / S) if S else 'infinitely'} "
            f"commits per flush, more than the {c} client(s) can have waiting: some commits "
            "returned without a flush.")))
    else:
        out.append(Check("flush_calls_cover_commits", "passed", formula,
                         "Each flush call covers no more commits than there are clients."))
    return out


def _device_sees_flushes(S: float | None, D: float | None, local_block_device: bool, write_cache: str | None,
                         numbers: Numbers) -> Check:
    """Check 4: the flush calls reach the device."""
    name = "device_sees_flushes"
    formula = "not (S > 0 and D ~ 0)"
    if S is None or D is None:
        return Check(name, "not_checked", formula,
                     "S (server flush calls) not measured" if S is None else "D (device flushes) not measured")
    if not local_block_device:
        return Check(name, "not_checked", formula, "not on a local block device, so device flush counters say nothing")
    if write_cache is not None and write_cache.strip().lower() == "write through":
        return Check(name, "not_checked", formula, (
            "the device declares no volatile write cache, so the kernel sends it no flushes; "
            "durability rests on that declaration"))
    d_zero_limit = min(DEVICE_ABOUT_ZERO_FRACTION * S, DEVICE_ABOUT_ZERO_PER_S)
    numbers["D_about_zero_below"] = d_zero_limit
    formula = (f"not (S > 0 and D < min({DEVICE_ABOUT_ZERO_FRACTION:g} x S, {DEVICE_ABOUT_ZERO_PER_S:g}/s)): "
               f"S = {_g(S)}, D = {_g(D)}, threshold {_g(d_zero_limit)}")
    if S > 0 and D < DEVICE_ABOUT_ZERO_FRACTION * S and D < DEVICE_ABOUT_ZERO_PER_S:
        return Check(name, "failed", formula, (
            f"The server made {_g(S)} flush calls/s but the device completed about no flushes "
            f"({_g(D)}/s): the flushes stop before the disk (nobarrier mount, a layer that drops "
            "them), so commits can sit in a volatile cache."))
    return Check(name, "passed", formula, "Flush calls reach the device.")


def _verdict(C: float, S: float | None, checks: list[Check], numbers: Numbers) -> PlausibilityVerdict:
    """The verdict of the checks: the first failure gives the reason."""
    failed = [ch for ch in checks if ch.status == "failed"]
    passed = [ch for ch in checks if ch.status == "passed"]
    not_checked = [ch.name for ch in checks if ch.status == "not_checked"]
    gcf = C / S if S else None
    numbers["group_commit_factor"] = gcf
    ran = [ch.formula for ch in checks if ch.status != "not_checked"]
    formula = "; ".join(ran) if ran else "nothing compared"
    if failed:
        status, reason = "implausible", failed[0].reason
        if len(failed) > 1:
            reason += " (Also failed: " + ", ".join(ch.name for ch in failed[1:]) + ".)"
    elif passed:
        status = "plausible"
        reason = (f"Every check that could run passed ({', '.join(ch.name for ch in passed)})"
                  + (f"; {_g(gcf)} commits per flush call." if gcf is not None else "."))
    else:
        status = "cannot_tell"
        reason = "No check could run: " + "; ".join(f"{ch.name}: {ch.reason}" for ch in checks) + "."
    return PlausibilityVerdict(status=status, reason=reason, formula=formula, numbers=numbers,
                               checks=checks, not_checked=not_checked,
                               group_commit_factor=gcf if status == "plausible" else None)
