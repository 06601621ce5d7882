"""A vs B in sentences: which parts of the mean transaction explain why one step is slower than another.

Pure functions of two steps' time accounting (:mod:`reports.model.accounting`) and
their settings verdicts (:mod:`reports.model.durability_settings`). The two steps ran
the same workload at the same client count; the *gap* is the slower side's mean
transaction wall time minus the faster side's (µs). Each accounting component
(client CPU, round trips, server CPU, waits by shared class, unaccounted) is
keyed the same on both engines, so the components line up across engines and
their differences add up to the gap exactly when both sides' shares add to 1.

What the sentences say, in this order:

1. the gap: which side is faster, by how much, and the two mean transaction times;
2. a durability difference, always, when the two are not at the same
   durability level (one durable, the other relaxed or unknown; or one commit
   waits for its log flush and the other's does not);
3. each statement whose plans read a table differently on the two sides (a
   full scan against an index lookup), given by the caller from the steps'
   statement plans;
4. the components that explain the gap, largest first, in µs per transaction
   and share of the gap;
5. the largest component that goes the other way (the slower side spends less
   there), when it offsets a noticeable part of the gap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from diag.core.engines import Engine
from reports.model.accounting import StepAccounting
from reports.model.durability_settings import SettingsVerdict

COMMIT_FLUSH = "wait:commit_flush"
UNACCOUNTED = "unaccounted"
WAIT_PREFIX = "wait:"
# A component must explain at least this share of the gap to get its own sentence (the first always does).
MIN_SHARE = 0.05
MAX_COMPONENT_SENTENCES = 4


@dataclass(frozen=True)
class Side:
    """One side of a comparison, as the sentences name and describe it.

    ``name``: the target label, or the run's (bundle) name when both sides carry the same label.
    ``tps``: its measured transactions/s. ``accounting``: its time accounting (None when the
    bundle had no data for it). ``durability``: its settings verdict (None when unknown).
    """

    name: str
    tps: float
    engine: Engine
    accounting: StepAccounting | None
    durability: SettingsVerdict | None


@dataclass(frozen=True)
class Contribution:
    """One component's part in the gap: µs per transaction on each side, the difference (slow - fast) and its
    share of the gap (None when there is no positive gap to share)."""

    key: str
    label: str
    fast_us: float
    slow_us: float
    difference_us: float
    share_of_gap: float | None


def us(v: float) -> str:
    """µs for people: '85 µs', '1,234 µs', '4.2 µs'."""
    if v == 0:
        return "0 µs"
    return f"{v:,.1f} µs" if abs(v) < 10 else f"{v:,.0f} µs"


def pct(share: float) -> str:
    """A share as a percentage: '35%', '0.4%'."""
    p = 100 * share
    return f"{p:.1f}%" if abs(p) < 1 else f"{p:.0f}%"


def gap_us(fast: StepAccounting, slow: StepAccounting) -> float:
    """The slower side's mean transaction wall time minus the faster side's (µs)."""
    return slow.wall_us_per_txn - fast.wall_us_per_txn


def contributions(fast: StepAccounting, slow: StepAccounting) -> list[Contribution]:
    """Every component of either side, by difference (slow - fast), largest first; a component one side
    lacks counts as 0 µs there (nothing of it was measured)."""
    gap = gap_us(fast, slow)
    keys = list(dict.fromkeys([c.key for c in slow.components] + [c.key for c in fast.components]))
    out = []
    for key in keys:
        f, s = fast.get(key), slow.get(key)
        fu = f.us_per_txn if f else 0.0
        su = s.us_per_txn if s else 0.0
        label = joint_label(s.label if s else None, f.label if f else None)
        out.append(Contribution(key, label, fu, su, su - fu, (su - fu) / gap if gap > 0 else None))
    out.sort(key=lambda c: (-c.difference_us, c.key))
    return out


def joint_label(a: str | None, b: str | None) -> str:
    """One label for a row both sides share: the same words, or (across engines) the shared words with each
    engine's own in the parentheses: "waits: commit flush (WAL)" + "... (redo log)" -> "... (WAL / redo log)"."""
    if not a or not b or a == b:
        return a or b or ""
    ha, _, ta = a.partition(" (")
    hb, _, tb = b.partition(" (")
    if ha == hb and ta.endswith(")") and tb.endswith(")"):
        return f"{ha} ({ta[:-1]} / {tb[:-1]})"
    return f"{a} / {b}"


def durability_differs(a: SettingsVerdict | None, b: SettingsVerdict | None) -> bool:
    """Whether two settings verdicts put their servers at different durability levels: their status differs
    (durable / relaxed / unknown, a missing verdict being unknown), or both know whether a commit waits for
    its log flush and they disagree."""
    sa = a.status if a else "unknown"
    sb = b.status if b else "unknown"
    if sa != sb:
        return True
    wa = a.commit_waits_for_flush if a else None
    wb = b.commit_waits_for_flush if b else None
    return wa is not None and wb is not None and wa != wb


def _relaxed_clause(side: Side) -> str:
    """What the less durable side does, with the settings that say so."""
    v = side.durability
    if v is None or v.status == "unknown":
        missing = ", ".join(v.unknown) if v and v.unknown else "its settings"
        return f"{side.name}'s durability is not known (not collected: {missing})"
    commit = [r for r in v.relaxed if r.setting in side.engine.commit_path_settings]
    named = ", ".join(f"{r.setting}={r.value}" for r in (commit or v.relaxed))
    if v.commit_waits_for_flush is False:
        return f"{side.name} does not flush at commit ({named})"
    return f"{side.name} is not crash-safe ({named})"


def _durable_clause(side: Side) -> str:
    """What the more durable side pays at commit, from its commit-flush wait when it was sampled."""
    log = side.engine.log_name or "log"
    c = side.accounting.get(COMMIT_FLUSH) if side.accounting else None
    if c is not None and c.us_per_txn > 0:
        return (f"{side.name} waits {us(c.us_per_txn)} per transaction on the {log} flush at commit "
                f"({pct(c.share)} of its time)")
    if side.durability is not None and side.durability.commit_waits_for_flush:
        return f"{side.name} flushes its {log} at every commit"
    return f"{side.name} is durable"


def _rank(v: SettingsVerdict | None) -> int:
    """Higher is more durable: durable 2, unknown 1, relaxed 0; a commit that skips its flush ranks below."""
    base = {"durable": 2, "unknown": 1}.get(v.status if v else "unknown", 0)
    return base - (1 if v is not None and v.commit_waits_for_flush is False else 0)


def durability_sentence(fast: Side, slow: Side) -> str | None:
    """The sentence saying the two are not at the same durability level; None when they are."""
    if not durability_differs(fast.durability, slow.durability):
        return None
    strong, weak = (fast, slow) if _rank(fast.durability) >= _rank(slow.durability) else (slow, fast)
    if strong.durability is None or strong.durability.status != "durable":
        # Neither is known to be durable (unknown vs relaxed, or relaxed two different ways).
        return f"{_relaxed_clause(weak)}; {_relaxed_clause(strong)}: the two may not be at the same durability level."
    known = weak.durability is not None and weak.durability.status == "relaxed"
    verb = "are not" if known else "may not be"
    return f"{_durable_clause(strong)}; {_relaxed_clause(weak)}: the two {verb} at the same durability level."


def headline(fast: Side, slow: Side) -> str:
    """Which side is faster, by how much, and the two mean transaction times."""
    ratio = fast.tps / slow.tps if slow.tps else None
    head = f"{fast.name} is {ratio:.2f}x faster than {slow.name}" if ratio else f"{fast.name} is faster"
    if fast.accounting is None or slow.accounting is None:
        return f"{head} ({fast.tps:,.0f} against {slow.tps:,.0f} transactions/s)."
    f, s = fast.accounting.wall_us_per_txn, slow.accounting.wall_us_per_txn
    return (f"{head}: its mean transaction takes {us(f)}, {slow.name}'s {us(s)} "
            f"(a gap of {us(s - f)} per transaction).")


def _component_sentence(slow: Side, fast: Side, c: Contribution) -> str:
    # Unaccounted time is what no source measured: said as such, not as something spent "on" it.
    if c.key == UNACCOUNTED:
        what = "in time no source accounts for (unaccounted)"
    elif c.key.startswith(WAIT_PREFIX):
        what = "waiting on " + c.label.removeprefix("waits: ")
    else:
        what = f"on {c.label}"
    share = f", {pct(c.share_of_gap)} of the gap" if c.share_of_gap is not None else ""
    if c.difference_us >= 0:
        return (f"{slow.name} spends {us(c.difference_us)} more per transaction {what} "
                f"({us(c.slow_us)} against {us(c.fast_us)} on {fast.name}){share}.")
    offsets = f", which offsets {pct(-c.share_of_gap)} of the gap" if c.share_of_gap is not None else ""
    return (f"{slow.name} spends {us(-c.difference_us)} less per transaction {what} "
            f"({us(c.slow_us)} against {us(c.fast_us)} on {fast.name}){offsets}.")


def component_sentences(fast: Side, slow: Side, limit: int = MAX_COMPONENT_SENTENCES) -> list[str]:
    """The components that explain the gap, largest first, then the largest that offsets it."""
    if fast.accounting is None or slow.accounting is None:
        missing = " and ".join(s.name for s in (fast, slow) if s.accounting is None)
        return [f"No time accounting for {missing} (no CPU or wait samples in the step's window): "
                "the gap cannot be split into its parts."]
    cs = contributions(fast.accounting, slow.accounting)
    if not cs or cs[0].share_of_gap is None:
        return ["Their mean transactions take about the same time: no component explains a gap."]
    out = [_component_sentence(slow, fast, c) for i, c in enumerate(cs[:limit])
           if c.difference_us > 0 and (i == 0 or (c.share_of_gap or 0) >= MIN_SHARE)]
    against = cs[-1]
    if against.difference_us < 0 and -(against.share_of_gap or 0) >= MIN_SHARE:
        out.append(_component_sentence(slow, fast, against))
    return out


def pair_sentences(fast: Side, slow: Side, plans: Sequence[str] = ()) -> list[str]:
    """Every sentence of one comparison, in reading order (see the module docstring). ``plans``: the statements
    whose plans differ between the two sides (:func:`reports.model.plans.plan_differences`), said after the
    durability difference and before the time components: like it, they say the two did not do the same work."""
    d = durability_sentence(fast, slow)
    return [headline(fast, slow), *([d] if d else []), *plans, *component_sentences(fast, slow)]


def side_names(labels: Sequence[str], runs: Sequence[str], first: bool = True) -> tuple[str, str]:
    """How the sentences call the two sides: by target label, by run name when the labels are equal (a run
    compared with another of the same target), by their place on the command line when those are equal too
    (``first``: the first side is the first run named; the sides come fastest first, not in that order)."""
    (la, lb), (ra, rb) = labels, runs
    if la != lb:
        return la, lb
    if ra != rb:
        return ra, rb
    if not first:
        return f"{la} (second run)", f"{lb} (first run)"
    return f"{la} (first run)", f"{lb} (second run)"
