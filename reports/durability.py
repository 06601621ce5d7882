"""Durability verdicts: do the settings make commits durable, and are the measured rates possible?

Pure functions, no I/O: the report calls them with numbers read from the run
bundle, so re-rendering an old run gives the same verdict.

Two questions, kept apart:

* :func:`settings_verdict` - what the server's settings promise. A setting that
  was not collected is "unknown", never assumed to be at its default.
* :func:`plausibility_verdict` - whether the measured commit rate could have
  been produced by a server that really flushes each commit, given what the disk
  can do (F, from :mod:`collectors.fsync_test`), how often the server called
  fsync/fdatasync (S) and how many flushes the device completed (D).

The physical argument (seed 004, R. Haas / G. Smith): a commit that waits for
its WAL/redo to reach stable storage needs a flush; one flush takes 1/F s; with
c clients, group commit can merge at most c waiting commits into one flush (each
client has at most one commit in flight). So C <= F * c, and C <= S * c.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import NamedTuple

from diag.errors import DiagError

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

# Durable values, for the record (documentation pages cited where each is judged):
PG_WAL_SYNC_METHODS = ("fdatasync", "fsync", "open_datasync", "open_sync", "fsync_writethrough")

_TRUE = ("on", "true", "yes", "1")
_FALSE = ("off", "false", "no", "0")


# --------------------------------------------------------------------------- settings


class RelaxedSetting(NamedTuple):
    """A setting that weakens durability: its name, its value, and what it risks (one sentence)."""

    setting: str
    value: str
    risk: str


@dataclass(frozen=True)
class SettingsVerdict:
    """What the settings promise about committed data surviving a crash.

    ``status``: "durable" (every checked setting known and safe), "relaxed" (at least
    one setting trades durability for speed; see ``relaxed``) or "unknown" (nothing
    relaxed, but some settings were not collected; see ``unknown``). ``durable`` is
    ``status == "durable"``. ``notes`` are caveats that do not by themselves make the
    server non-durable (setting, value, sentence). ``commit_waits_for_flush`` is True
    when each commit waits for its WAL/redo to be flushed (the condition under which
    :func:`plausibility_verdict`'s flush bounds hold: pass it as ``settings_durable``),
    False when a setting lets commits return first, None when that is not known.
    """

    engine: str
    status: str
    durable: bool
    reason: str
    relaxed: list[RelaxedSetting] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    notes: list[RelaxedSetting] = field(default_factory=list)
    commit_waits_for_flush: bool | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "engine": self.engine, "status": self.status, "durable": self.durable, "reason": self.reason,
            "relaxed": [r._asdict() for r in self.relaxed], "unknown": list(self.unknown),
            "notes": [n._asdict() for n in self.notes], "commit_waits_for_flush": self.commit_waits_for_flush,
        }


def _norm_engine(engine: str) -> str:
    e = engine.strip().lower()
    if e in ("postgres", "postgresql", "pg"):
        return "postgres"
    if e in ("mysql", "mariadb"):
        return "mysql"
    raise DiagError(f"durability verdict: unknown engine {engine!r} (expected postgres or mysql)")


class _Acc:
    """Collects per-setting findings while the rules run."""

    def __init__(self, settings: dict[str, str]) -> None:
        self.s = {k.strip().lower(): str(v).strip() for k, v in settings.items() if v is not None}
        self.relaxed: list[RelaxedSetting] = []
        self.unknown: list[str] = []
        self.notes: list[RelaxedSetting] = []
        self.waits: bool | None = True  # flips to False/None as rules find out

    def get(self, name: str) -> str | None:
        v = self.s.get(name)
        if v is None or v == "":
            self.unknown.append(name)
            return None
        return v

    def no_wait(self) -> None:
        self.waits = False

    def wait_unknown(self) -> None:
        if self.waits is True:
            self.waits = None


def settings_verdict(engine: str, settings: dict[str, str]) -> SettingsVerdict:
    """Judge durability settings of a PostgreSQL or MySQL/MariaDB server.

    ``engine``: "postgres" (also "postgresql", "pg") or "mysql" (also "mariadb";
    MariaDB is told apart by a ``version`` setting containing "MariaDB").
    ``settings``: name -> value as SHOW / pg_settings / SHOW GLOBAL VARIABLES
    print them (case of names and values does not matter).
    """
    eng = _norm_engine(engine)
    acc = _Acc(settings)
    if eng == "postgres":
        _postgres(acc)
    else:
        _mysql(acc)
    if acc.relaxed:
        status = "relaxed"
        reason = "Not durable: " + "; ".join(f"{r.setting}={r.value}" for r in acc.relaxed) + "."
    elif acc.unknown:
        status = "unknown"
        reason = "Cannot tell: not collected: " + ", ".join(acc.unknown) + "."
    else:
        status = "durable"
        reason = "Every checked setting makes committed transactions survive a crash."
    waits = acc.waits
    if waits is True and any(u in _COMMIT_PATH[eng] for u in acc.unknown):
        waits = None
    return SettingsVerdict(engine=eng, status=status, durable=status == "durable", reason=reason,
                           relaxed=acc.relaxed, unknown=acc.unknown, notes=acc.notes,
                           commit_waits_for_flush=waits)


# Settings that decide whether a commit waits for a flush (others guard against torn pages).
_COMMIT_PATH = {
    "postgres": ("fsync", "synchronous_commit"),
    "mysql": ("innodb_flush_log_at_trx_commit", "innodb_flush_method"),
}


def _postgres(acc: _Acc) -> None:
    # Source: PostgreSQL documentation, "Write Ahead Log" server configuration,
    # https://www.postgresql.org/docs/current/runtime-config-wal.html
    fsync = acc.get("fsync")
    if fsync is not None:
        if fsync.lower() in _FALSE:
            acc.relaxed.append(RelaxedSetting("fsync", fsync, (
                "PostgreSQL never forces WAL or data files to disk: an operating-system crash or power "
                "loss can leave the cluster corrupt beyond repair, not merely missing recent commits.")))
            acc.no_wait()
        elif fsync.lower() not in _TRUE:
            acc.notes.append(RelaxedSetting("fsync", fsync, "Not a boolean PostgreSQL accepts; cannot judge it."))
            acc.wait_unknown()

    sc = acc.get("synchronous_commit")
    if sc is not None:
        v = sc.lower()
        if v in _FALSE:
            acc.relaxed.append(RelaxedSetting("synchronous_commit", sc, (
                "A commit returns before its WAL is flushed: a server crash, OS crash or power loss can "
                "lose the last commits (up to 3 x wal_writer_delay, 600 ms by default) that clients were "
                "told succeeded, but the database stays consistent, with no corruption.")))
            acc.no_wait()
        elif v == "local":
            acc.notes.append(RelaxedSetting("synchronous_commit", sc, (
                "Commits wait for the local WAL flush, so they are durable on this server; only "
                "synchronous standbys are not waited for (a failover could lose the last commits).")))
        elif v == "remote_write":
            acc.notes.append(RelaxedSetting("synchronous_commit", sc, (
                "Commits wait for the local WAL flush (durable on this server); synchronous standbys "
                "only need to have written it, so losing the primary and a standby's OS together could "
                "lose the last commits.")))
        elif v not in _TRUE + ("remote_apply",):
            acc.notes.append(RelaxedSetting("synchronous_commit", sc, "Not a value PostgreSQL documents; "
                                            "cannot tell whether commits wait for a flush."))
            acc.wait_unknown()

    fpw = acc.get("full_page_writes")
    if fpw is not None and fpw.lower() in _FALSE:
        acc.relaxed.append(RelaxedSetting("full_page_writes", fpw, (
            "A data page half-written when the OS crashes or power fails (a torn page) cannot be "
            "repaired from WAL, so crash recovery can leave silent or unrecoverable corruption; safe "
            "only on storage that writes 8 kB pages atomically (e.g. ZFS).")))

    wsm = acc.get("wal_sync_method")
    if wsm is not None and wsm.lower() not in PG_WAL_SYNC_METHODS:
        # Every documented method is durable when the storage honours it; only an
        # unrecognised value is worth a word.
        acc.notes.append(RelaxedSetting("wal_sync_method", wsm, (
            "Not a method PostgreSQL documents (fdatasync, fsync, open_datasync, open_sync, "
            "fsync_writethrough); cannot tell how WAL is flushed.")))


def _is_mariadb(acc: _Acc) -> bool:
    return "mariadb" in (acc.s.get("version", "") + " " + acc.s.get("version_comment", "")).lower()


def _mariadb_major(acc: _Acc) -> int | None:
    try:
        return int(acc.s.get("version", "").split(".", 1)[0])
    except ValueError:
        return None


def _mysql(acc: _Acc) -> None:
    # Sources: MySQL Reference Manual, "InnoDB Startup Options and System Variables",
    # https://dev.mysql.com/doc/refman/8.0/en/innodb-parameters.html
    # (sysvar_innodb_flush_log_at_trx_commit, sysvar_innodb_flush_method,
    # sysvar_innodb_doublewrite); "Binary Logging Options and Variables",
    # https://dev.mysql.com/doc/refman/8.0/en/replication-options-binary-log.html#sysvar_sync_binlog;
    # MariaDB: https://mariadb.com/kb/en/innodb-system-variables/ and
    # https://mariadb.com/docs/server/server-usage/storage-engines/innodb/innodb-flush-method
    mariadb = _is_mariadb(acc)
    timeout = acc.s.get("innodb_flush_log_at_timeout", "1")  # MySQL only; seconds between log flushes
    every = "about once a second" if timeout in ("", "1") else f"about every {timeout} s"

    flatc = acc.get("innodb_flush_log_at_trx_commit")
    if flatc is not None:
        if flatc == "0":
            acc.relaxed.append(RelaxedSetting("innodb_flush_log_at_trx_commit", flatc, (
                f"The redo log is written and flushed {every}, not at commit: a mysqld crash, and also an "
                f"OS crash or power loss, can lose the commits of that last interval (InnoDB still "
                "recovers to a consistent state).")))
            acc.no_wait()
        elif flatc == "2":
            acc.relaxed.append(RelaxedSetting("innodb_flush_log_at_trx_commit", flatc, (
                f"The redo log is written to the OS at commit but flushed only {every}: a mysqld crash "
                "loses nothing, an OS crash or power loss can lose the commits of that last interval.")))
            acc.no_wait()
        elif flatc == "3" and mariadb:
            pass  # MariaDB: flush at prepare and at commit; durable
        elif flatc != "1":
            acc.notes.append(RelaxedSetting("innodb_flush_log_at_trx_commit", flatc,
                                            "Not a value this server documents; cannot judge it."))
            acc.wait_unknown()

    log_bin = acc.get("log_bin")
    if log_bin is not None and log_bin.lower() in _TRUE:
        sb = acc.get("sync_binlog")
        if sb is not None and sb != "1":
            how = ("left to the OS" if sb == "0" else f"synced only every {sb} commit groups")
            # With the binary log on, it is the commit coordinator: recovery rolls back
            # InnoDB transactions whose binlog events are missing. So a lost binlog tail
            # loses commits even with innodb_flush_log_at_trx_commit=1.
            acc.relaxed.append(RelaxedSetting("sync_binlog", sb, (
                f"The binary log is on but {how}: after an OS crash or power loss, recovery rolls back "
                "committed transactions whose binlog events were lost, and replicas may already have "
                "applied transactions the source no longer has.")))

    dw = acc.get("innodb_doublewrite")
    if dw is not None:
        v = dw.upper()
        if v in ("OFF", "0", "FALSE", "NO"):
            acc.relaxed.append(RelaxedSetting("innodb_doublewrite", dw, (
                "A 16 kB page half-written when the OS crashes or power fails (a torn page) has no intact "
                "copy to recover from, so crash recovery can fail or leave corruption; safe only on "
                "storage that writes pages atomically (e.g. ZFS, devices with atomic writes).")))
        elif v == "DETECT_ONLY":
            acc.relaxed.append(RelaxedSetting("innodb_doublewrite", dw, (
                "Only metadata goes to the doublewrite buffer: torn pages after an OS crash or power loss "
                "are detected at recovery but cannot be repaired.")))
        elif v not in ("ON", "1", "TRUE", "YES", "DETECT_AND_RECOVER"):
            acc.notes.append(RelaxedSetting("innodb_doublewrite", dw, "Not a value this server documents."))

    fm = acc.get("innodb_flush_method")
    if fm is not None:
        v = fm.lower()
        major = _mariadb_major(acc) if mariadb else None
        if v in ("nosync", "littlesync"):
            if mariadb and major is not None and major >= 11:
                acc.notes.append(RelaxedSetting("innodb_flush_method", fm, (
                    "Deprecated since MariaDB 11.0, where this value maps to fsync and no longer skips "
                    "flushes.")))
            else:
                what = "skips fsync()" if v == "nosync" else "flushes only rarely"
                acc.relaxed.append(RelaxedSetting("innodb_flush_method", fm, (
                    f"Documented for internal performance testing only and unsupported: InnoDB {what} "
                    "on its files, so an OS crash or power loss can lose commits and corrupt data files"
                    + (" (MariaDB 11.0+ ignores it; the server version was not given)."
                       if mariadb and major is None else "."))))
                acc.wait_unknown()  # whether the redo log itself is still flushed differs by version
        elif v == "o_direct_no_fsync":
            acc.notes.append(RelaxedSetting("innodb_flush_method", fm, (
                "InnoDB skips fsync() after O_DIRECT writes to data files (the redo log is still flushed): "
                "durable only if data files and redo log share a device, or the data files' device has no "
                "volatile write cache; the manual calls it unsuitable for some filesystems such as XFS.")))
        elif v not in ("fsync", "fdatasync", "o_dsync", "o_direct", "normal", "unbuffered", "async_unbuffered"):
            acc.notes.append(RelaxedSetting("innodb_flush_method", fm, "Not a value this server documents; "
                                            "cannot tell how InnoDB flushes."))
            acc.wait_unknown()


# --------------------------------------------------------------------------- plausibility


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
    numbers: dict[str, float | int | bool | str | None] = {
        "C": C, "c": c, "F": F, "S": S, "D": D, "local_block_device": local_block_device,
        "settings_durable": settings_durable, "write_cache": write_cache,
        "flush_capacity_margin": FLUSH_CAPACITY_MARGIN, "flush_calls_margin": FLUSH_CALLS_MARGIN,
    }
    checks: list[Check] = []
    not_durable_why = ("settings let commits return before a flush, so flush rates do not bound them"
                       if settings_durable is False else
                       "not known whether settings make commits wait for a flush")

    # 1. the disk's flush rate bounds commits
    name = "flush_capacity"
    if F is None:
        checks.append(Check(name, "not_checked", "C <= F x c x margin", "F (flush capability) not measured"))
    elif settings_durable is not True:
        checks.append(Check(name, "not_checked", "C <= F x c x margin", not_durable_why))
    else:
        limit = F * c * FLUSH_CAPACITY_MARGIN
        numbers["F_c_margin"] = limit
        formula = (f"C <= F x c x {FLUSH_CAPACITY_MARGIN}: {_g(C)} <= {_g(F)} x {c} x "
                   f"{FLUSH_CAPACITY_MARGIN} = {_g(limit)}")
        if C > limit:
            checks.append(Check(name, "failed", formula, (
                f"{_g(C)} commits/s is more than {c} client(s) can get from a disk that completes "
                f"{_g(F)} flushes/s, even if every flush carried one commit from each client "
                f"({_g(limit)}/s with margin): the commits cannot all have been flushed.")))
        else:
            checks.append(Check(name, "passed", formula, "Within what the disk's flush rate allows."))

    # 2./3. the server's flush calls
    s_zero_limit = min(ABOUT_ZERO_FRACTION * C, ABOUT_ZERO_PER_S)
    if S is None or settings_durable is not True:
        why = "S (server flush calls) not measured" if S is None else not_durable_why
        checks.append(Check("flush_calls_present", "not_checked", "not (C > 0 and S ~ 0)", why))
        checks.append(Check("flush_calls_cover_commits", "not_checked", "C <= S x c x margin", why))
    else:
        numbers["S_about_zero_below"] = s_zero_limit
        about_zero = S < ABOUT_ZERO_FRACTION * C and S < ABOUT_ZERO_PER_S
        formula = (f"not (C > 0 and S < min({ABOUT_ZERO_FRACTION:g} x C, {ABOUT_ZERO_PER_S:g}/s)): "
                   f"C = {_g(C)}, S = {_g(S)}, threshold {_g(s_zero_limit)}")
        if C > 0 and about_zero:
            checks.append(Check("flush_calls_present", "failed", formula, (
                f"The server committed {_g(C)} transactions/s but made about no flush calls ({_g(S)}/s): "
                "commits are not being flushed, whatever the settings say.")))
        else:
            checks.append(Check("flush_calls_present", "passed", formula, "The server does call fsync/fdatasync."))
        limit = S * c * FLUSH_CALLS_MARGIN
        numbers["S_c_margin"] = limit
        formula = (f"C <= S x c x {FLUSH_CALLS_MARGIN}: {_g(C)} <= {_g(S)} x {c} x "
                   f"{FLUSH_CALLS_MARGIN} = {_g(limit)}")
        if C > limit:
            checks.append(Check("flush_calls_cover_commits", "failed", formula, (
                f"{_g(C)} commits/s with {_g(S)} flush calls/s is {_g(C / S) if S else 'infinitely'} "
                f"commits per flush, more than the {c} client(s) can have waiting: some commits "
                "returned without a flush.")))
        else:
            checks.append(Check("flush_calls_cover_commits", "passed", formula,
                                "Each flush call covers no more commits than there are clients."))

    # 4. the device sees the flushes
    name = "device_sees_flushes"
    formula = "not (S > 0 and D ~ 0)"
    if S is None or D is None:
        checks.append(Check(name, "not_checked", formula,
                            "S (server flush calls) not measured" if S is None else "D (device flushes) not measured"))
    elif not local_block_device:
        checks.append(Check(name, "not_checked", formula,
                            "not on a local block device, so device flush counters say nothing"))
    elif write_cache is not None and write_cache.strip().lower() == "write through":
        checks.append(Check(name, "not_checked", formula, (
            "the device declares no volatile write cache, so the kernel sends it no flushes; "
            "durability rests on that declaration")))
    else:
        d_zero_limit = min(DEVICE_ABOUT_ZERO_FRACTION * S, DEVICE_ABOUT_ZERO_PER_S)
        numbers["D_about_zero_below"] = d_zero_limit
        formula = (f"not (S > 0 and D < min({DEVICE_ABOUT_ZERO_FRACTION:g} x S, {DEVICE_ABOUT_ZERO_PER_S:g}/s)): "
                   f"S = {_g(S)}, D = {_g(D)}, threshold {_g(d_zero_limit)}")
        if S > 0 and D < DEVICE_ABOUT_ZERO_FRACTION * S and D < DEVICE_ABOUT_ZERO_PER_S:
            checks.append(Check(name, "failed", formula, (
                f"The server made {_g(S)} flush calls/s but the device completed about no flushes "
                f"({_g(D)}/s): the flushes stop before the disk (nobarrier mount, a layer that drops "
                "them), so commits can sit in a volatile cache.")))
        else:
            checks.append(Check(name, "passed", formula, "Flush calls reach the device."))

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
