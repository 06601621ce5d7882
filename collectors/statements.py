"""Statement digests per step, and plans of the top statements: the shared half of both engines' sources.

An in-process source (see :mod:`collectors.base`) per target. ``step_started``
(called when the measured window opens) snapshots the engine's digest view (and,
PostgreSQL, its per-table counters); a thread samples statement texts in the
middle of the step where the engine needs literals for a plan (MySQL/MariaDB);
``step_finished`` snapshots again and returns ``{"statements": ...}`` for the
step's results.json row: the increase of each statement's counters over the
step (:func:`digest_delta`), dbdiag's own statements left out, the top
:data:`TOP_N` by server time, and the plans of the first :data:`PLAN_N`
(:class:`diag.core.schema.StepStatements`). The engines' halves
(:mod:`collectors.pg.statements`, :mod:`collectors.mysql.statements`) read
the views, tell own statements, explain and estimate rows examined.

A source that cannot run (no pg_stat_statements, performance_schema off, a
missing privilege) says why in its probe, and the run goes on without it.

Plans of statements read from the server are made only where planning cannot
lend dbdiag's privileges to someone else's code (:mod:`collectors.plansafety`):
an engine tells whose a statement is (:meth:`StatementSource.not_planned`), and
a plan not made carries the reason (``StatementPlan.not_made``). The run option
``plan_others`` (``--plan-others``) asks for other users' plans too.
"""

from __future__ import annotations

import abc
import contextlib
import json
import threading
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from collectors.base import Collector, CollectorContext, Probe
from collectors.plans import error_without_literals, without_literals
from collectors.plansafety import PlanNotMade, plan_refusal
from diag.core.bundle import safe_name
from diag.core.db import Session
from diag.core.errors import DbError, DiagError
from diag.core.schema import StatementPlan, StatementStat, StepStatements, TableStat

TOP_N = 15  # statements kept per step
PLAN_N = 5  # of them explained (EXPLAIN is cheap, but each plan is a statement on the measured server)
TEXT_CHARS = 2000
SNAPSHOT_TIMEOUT_MS = 5000  # a digest view holds up to 5,000 (PostgreSQL) / 200-10,000 (MySQL) rows
JOIN_SLACK_S = 10.0

Snapshot = dict[str, dict[str, Any]]
Actors = dict[str, float] | None  # user -> statements run so far (None: not known)
StepKey = tuple[str, str, int]
Moment = tuple[float, Snapshot, Snapshot, Actors]
TABLE_COUNTERS = ("seq_scan", "seq_tup_read", "idx_scan", "idx_tup_fetch", "n_tup_ins", "n_tup_upd", "n_tup_del")
EXPLAINABLE = ("select", "with", "insert", "update", "delete", "replace", "values", "table")


def digest_delta(start: Mapping[str, Mapping[str, Any]], end: Mapping[str, Mapping[str, Any]],
                 counters: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Per statement key, the increase of each counter from ``start`` to ``end``.

    A statement missing at start (new, or evicted and back) counts from zero, and
    so does a counter that went down (a reset); statements whose ``calls`` did not
    grow are left out. Counters absent from a row stay absent.
    """
    out: dict[str, dict[str, float]] = {}
    for key, cur in end.items():
        prev = start.get(key, {})
        d: dict[str, float] = {}
        for c in counters:
            if cur.get(c) is None:
                continue
            now, before = float(cur[c]), float(prev.get(c) or 0)
            d[c] = now if now < before else now - before
        if d.get("calls", 0) > 0:
            out[key] = d
    return out


def table_delta(start: Snapshot, end: Snapshot) -> list[TableStat]:
    """The tables whose counters grew from ``start`` to ``end`` (a counter that went down counts from zero)."""
    out: list[TableStat] = []
    for table, cur in sorted(end.items()):
        prev = start.get(table, {})
        d = {c: int(cur[c] if int(cur[c]) < int(prev.get(c) or 0) else int(cur[c]) - int(prev.get(c) or 0))
             for c in TABLE_COUNTERS if cur.get(c) is not None}
        if any(d.values()):
            out.append(TableStat(table=table, **d))
    return out


def explainable(text: str) -> bool:
    """Whether a statement text is one EXPLAIN accepts (not BEGIN, COMMIT, SET...)."""
    words = text.lstrip("( \n\t").split(None, 1)
    return bool(words) and words[0].lower() in EXPLAINABLE


def _int(v: float | None) -> int | None:
    return None if v is None else int(round(v))


class StatementSource(Collector, abc.ABC):
    """Per-step statement digests of one target; engines implement the abstract readers."""

    name = "statements"
    row_fields = ("statements",)
    title = "statement digests"
    sampled = False
    view: ClassVar[str] = ""  # the digest view, for the record's ``source``
    counters: ClassVar[tuple[str, ...]] = ("calls", "total_ms", "rows")
    mid_step_texts: ClassVar[bool] = False  # sample statement texts in the middle of each step
    # Seconds before the step's end to take its end snapshot (None: when the step has finished). MySQL counts
    # prepared statements per connection, and a connection's counts go when its client disconnects.
    end_early_s: ClassVar[float | None] = None
    mysql_dialect: ClassVar[bool] = False  # how a statement text is read (quotes, comments) before planning

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.session: Session | None = None
        self.notes: list[str] = []
        self._lock = threading.Lock()  # one statement at a time on the session (the mid-step thread)
        self.plan_others = bool(ctx.options.get("plan_others", False))
        self._starts: dict[StepKey, Moment] = {}
        self._texts: dict[StepKey, dict[str, str]] = {}
        self._users: dict[StepKey, dict[str, set[str]]] = {}
        self._ends: dict[StepKey, Moment] = {}
        # the step being recorded: (users who ran statements in it or None, statement key -> users seen)
        self._who: tuple[set[str] | None, dict[str, set[str]]] = (None, {})
        self._threads: dict[StepKey, tuple[threading.Thread, threading.Event]] = {}

    # -- what each engine answers ------------------------------------------------------------

    @abc.abstractmethod
    def open(self) -> Session:
        """A catalog session to the target."""

    @abc.abstractmethod
    def check(self, s: Session) -> tuple[str, str, list[str]]:
        """(why the source cannot run, or "", the fix, notes on what is partial)."""

    @abc.abstractmethod
    def snapshot(self, s: Session, texts: bool) -> Snapshot:
        """key -> counters (and ``text`` when ``texts``) of every statement the view holds now."""

    def table_snapshot(self, s: Session) -> Snapshot:
        """table -> counters (PostgreSQL); {} where the engine counts rows examined per statement."""
        return {}

    def sample_texts(self, s: Session) -> dict[str, str]:
        """key -> a statement text with its literals, seen now (MySQL/MariaDB); {} elsewhere."""
        return {}

    def actors(self, s: Session) -> Actors:
        """user -> statements run so far, where the digests carry no user (MySQL/MariaDB); None elsewhere."""
        return None

    def sample_users(self, s: Session) -> dict[str, set[str]]:
        """statement key -> the users seen running it now, where the digests carry no user; {} elsewhere."""
        return {}

    def not_planned(self, key: str, active: set[str] | None, seen: dict[str, set[str]]) -> str:
        """Why statement ``key`` is not planned ("" when it may be): whose it is. ``active``: the users
        whose statement counts grew in the step (None: not known); ``seen``: key -> users seen running it."""
        return ""

    @abc.abstractmethod
    def is_own(self, key: str, text: str) -> bool:
        """Whether a statement is dbdiag's own (marked; see :data:`collectors.sql.MARKER`)."""

    @abc.abstractmethod
    def explain(self, s: Session, text: str, key: str = "") -> tuple[StatementPlan, Any]:
        """The plan of ``text`` (statement ``key``) and the raw plan (JSON) to keep; a plan with ``error`` when
        it fails."""

    def step_tables(self, tables: list[TableStat]) -> None:
        """The step's per-table increases, before :meth:`examined` is asked about its statements."""

    def examined(self, d: Mapping[str, float], plan: StatementPlan | None,
                 tables: Snapshot) -> tuple[int | None, str]:
        """(rows examined, where the number comes from) for one statement's delta ``d``; ``tables``: the
        step's last :meth:`table_snapshot`."""
        v = d.get("rows_examined")
        return (_int(v), "server") if v is not None else (None, "")

    # -- lifecycle ---------------------------------------------------------------------------

    def probe(self) -> Probe:
        try:
            with self.open() as s:
                why, hint, notes = self.check(s)
        except DbError as e:
            return Probe(False, str(e), "check the target's DSN and the user's privileges")
        except DiagError as e:  # no SQL for this server version
            return Probe(False, str(e))
        if why:
            return Probe(False, why, hint)
        return Probe(True, missing=tuple(notes), hint=hint if notes else "")

    def start(self) -> None:
        """Open the session; a source that cannot start after a good probe stays off (an event says why), it
        does not stop the run."""
        why = ""
        try:
            self.session = self.open()
            why, _hint, self.notes = self.check(self.session)
        except DiagError as e:
            why = str(e)
        if why:
            if self.session is not None:
                self.session.close()
                self.session = None
            if self.ctx.bundle is not None:
                self.ctx.bundle.event("collector_off", f"{self.title} ({self.ctx.target.label}): {why}",
                                      collector=f"{self.name}--{self.ctx.target.label}")

    def stop(self) -> None:
        for th, ev in list(self._threads.values()):
            ev.set()
            th.join(JOIN_SLACK_S)
        if self.session is not None:
            self.session.close()
            self.session = None

    def sample(self) -> None:
        return None

    def _mine(self, info: Any) -> bool:
        return self.session is not None and info.target == self.ctx.target.label

    def step_started(self, info: Any) -> None:
        if not self._mine(info):
            return
        key: StepKey = (info.target, info.workload, info.clients)
        assert self.session is not None
        try:
            with self._lock:
                self._starts[key] = self._moment(self.session, False)
        except DiagError as e:  # the step goes on without its digests (the run's hooks do not guard us)
            self.notes.append(f"start snapshot of {info.workload} c={info.clients}: {e}")
            return
        if self.mid_step_texts or self.end_early_s is not None or getattr(info, "tail_s", 0.0) > 0:
            ev = threading.Event()
            th = threading.Thread(target=self._sample_mid_step, args=(key, info, ev), daemon=True)
            self._threads[key] = (th, ev)
            th.start()

    def _sample_mid_step(self, key: StepKey, info: Any, ev: threading.Event) -> None:
        """Texts in the middle of the step, then the end snapshot :attr:`end_early_s` before the end of its measured
        part (at that end when the step has a tail); nothing more once ``ev`` is set (the step ended: a step cut
        short gets its end snapshot when it finished)."""
        if self.mid_step_texts:
            if ev.wait(max(0.0, info.t_start + info.duration_s / 2 - time.time())) or self.session is None:
                return
            with contextlib.suppress(DiagError), self._lock:
                self._texts[key] = self.sample_texts(self.session)
            with contextlib.suppress(DiagError), self._lock:
                self._users[key] = self.sample_users(self.session)
        # A step with a tail (profiles record there: workloads.steps.steptail) ends its figures at the measured part's
        # end, so its statements end there too, not when step_finished comes after the tail.
        if self.end_early_s is None and not getattr(info, "tail_s", 0.0) > 0:
            return
        end_at = info.t_start + info.duration_s - (self.end_early_s or 0.0)
        if ev.wait(max(0.0, end_at - time.time())) or self.session is None:
            return
        with contextlib.suppress(DiagError), self._lock:
            self._ends[key] = self._moment(self.session, True)

    def _moment(self, s: Session, texts: bool) -> Moment:
        """The digests, table counters and statement counts per user, now (under :attr:`_lock`)."""
        t = time.time()
        snap, tables = self.snapshot(s, texts), self.table_snapshot(s)
        try:
            actors = self.actors(s)
        except DiagError:  # who ran what stays unknown: other users' statements are then not planned
            actors = None
        return t, snap, tables, actors

    def step_finished(self, info: Any) -> dict[str, Any] | None:
        if not self._mine(info):
            return None
        key: StepKey = (info.target, info.workload, info.clients)
        th = self._threads.pop(key, None)
        if th is not None:
            th[1].set()
            th[0].join(JOIN_SLACK_S)
        begun = self._starts.pop(key, None)
        if begun is None:
            return None
        texts = self._texts.pop(key, {})
        try:
            rec = self._record(key, begun, texts)
        except DiagError as e:
            rec = StepStatements(source=self.view, notes=(f"not collected for this step: {e}",))
        return {"statements": rec.to_dict()}

    # -- the record --------------------------------------------------------------------------

    def _record(self, key: StepKey, begun: Moment, samples: dict[str, str]) -> StepStatements:
        assert self.session is not None
        t0, start, tables0, actors0 = begun
        early = self._ends.pop(key, None)
        if early is None:
            with self._lock:
                early = self._moment(self.session, True)
        t1, end, tables1, actors1 = early
        active = None if actors0 is None or actors1 is None else \
            {u for u, n in actors1.items() if n > actors0.get(u, 0.0)}
        self._who = (active, self._users.pop(key, {}))
        delta = digest_delta(start, end, self.counters)
        texts = {k: str(end[k].get("text") or "") for k in delta}
        own = {k for k in delta if self.is_own(k, samples.get(k, "") or texts[k])}
        work = {k: d for k, d in delta.items() if k not in own}
        top = sorted(work.items(), key=lambda kv: (-kv[1].get("total_ms", 0.0), -kv[1]["calls"], kv[0]))[:TOP_N]
        table_stats = table_delta(tables0, tables1)
        self.step_tables(table_stats)
        stats = [self._stat(key, i, k, d, texts[k], samples.get(k, ""), tables1) for i, (k, d) in enumerate(top)]
        return StepStatements(source=self.view, t0=t0, t1=t1,
                              total_ms=round(sum(d.get("total_ms", 0.0) for d in work.values()), 3),
                              calls=int(sum(d["calls"] for d in work.values())), statements_seen=len(work),
                              own_excluded=len(own), statements=tuple(stats),
                              tables=tuple(table_stats), notes=tuple(self.notes))

    def _stat(self, step: StepKey, rank: int, key: str, d: Mapping[str, float], text: str, sample: str,
              tables: Snapshot) -> StatementStat:
        plan = None
        if rank < PLAN_N:
            plan = self._plan(step, rank, sample or text, key)
        examined, source = self.examined(d, plan, tables)
        ints = ("rows", "shared_blks_hit", "shared_blks_read", "shared_blks_dirtied", "shared_blks_written",
                "temp_blks_read", "temp_blks_written", "no_index_used")
        counts: dict[str, Any] = {c: _int(d.get(c)) for c in ints}
        # Digest texts are fingerprints already on MySQL; PostgreSQL keeps utility statements' literals.
        return StatementStat(key=key, text=self.ctx.statement_text(text)[:TEXT_CHARS], calls=int(d["calls"]),
                             total_ms=round(d.get("total_ms", 0.0), 3),
                             plan_ms=round(d["plan_ms"], 3) if d.get("plan_ms") is not None else None,
                             rows_examined=examined, examined_from=source,
                             tables=tuple(dict.fromkeys(n.table for n in plan.nodes if n.table)) if plan else (),
                             plan=plan, **counts)

    def _plan(self, step: StepKey, rank: int, text: str, key: str) -> StatementPlan | None:
        if not text or not explainable(text):
            return None
        why = plan_refusal(text, self.mysql_dialect) or self.not_planned(key, *self._who)
        if why:
            return StatementPlan(not_made=why)
        assert self.session is not None
        try:
            with self._lock:
                plan, raw = self.explain(self.session, text, key)
        except PlanNotMade as e:  # whose the statement is, found only now (PostgreSQL: the login's memberships)
            return StatementPlan(not_made=str(e))
        except DiagError as e:  # the server's error, or a plan of a shape the parser does not know
            return StatementPlan(error=error_without_literals(str(e), self.ctx.statement_text))
        plan, raw = without_literals(plan, raw, self.ctx.statement_text)
        if raw is not None and self.ctx.bundle is not None:
            label, workload, clients = step
            name = f"plan--{safe_name(label)}--{safe_name(workload)}--c{clients}--{rank + 1}.json"
            with contextlib.suppress(OSError):
                self.ctx.bundle.artifact(name).write_text(self.ctx.bundle.scrub(json.dumps(raw, indent=1, default=str)),
                                                         encoding="utf-8")
                plan = StatementPlan(method=plan.method, nodes=plan.nodes, artifact=f"artifacts/{name}",
                                     error=plan.error)
        return plan
