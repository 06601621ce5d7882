"""What an engine must provide, and where each part is found: the checklist for adding a third engine.

An engine is found in one place per layer:

- core (diag/core/engines/<engine>.py): the :class:`~diag.core.engines.base.Engine` object: connect, errors,
  version, settings, wait taxonomy, statement timeouts, and every part that is data (report vocabulary,
  parse/plan frames, background counters, wait samplers, placeholders, watch reads, table DDL words);
- its SQL folders (``Engine.sql_folder``) under collectors/, workloads/tpcc/tpcc_sql/ and workloads/watch/watch_sql/;
- each upper layer: one module (or package) per engine holding a typed parts record, and one registry line
  keyed by ``Engine.name`` that finds it (:data:`LAYER_PARTS`): collectors/<sql_folder>/ ``PARTS``
  (collectors.engines), workloads/engines/<module>.py (workloads.engines), reports/model/engines/<module>.py
  (reports.model.engines), reports/rules/engines/<module>.py (reports.rules.engines); the throwaway server's
  launcher in diag/core/servers/<module>.py (diag.core.servers).

Adding an engine: a module in diag/core/engines/ and a line in ``ENGINES``; its SQL folders; a module in
diag/core/servers/ and one per layer above (copy pg.py or mysql.py there: its record's fields say what to fill)
and a line in each registry of :data:`LAYER_PARTS`. :data:`CONTRACT` lists every part, the fields of the parts records included; the tests
check that each engine in :data:`diag.core.engines.ENGINES` provides each one (a registry line, every field of its
record set), and that no other registry keyed by engine name exists (so the list stays the whole checklist).

Read with :mod:`ast` where a registry is found, and by importing the modules for the checks; nothing runs a
server (the integration tests do, per engine).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path
from typing import Any

import pytest

from diag.core.engines import ENGINES, WAIT_CLASSES, Engine
from diag.core.engines.base import Engine as BaseEngine

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("diag", "collectors", "workloads", "reports")

# Methods an engine class must define itself (the base raises NotImplementedError or answers "other").
METHODS: dict[str, str] = {
    "error_kind": "map_error: SQLSTATE / errno -> our error kinds",
    "connect_kwargs": "connect: the driver's connection arguments",
    "identify": "version and product",
    "statement_timeout_sql": "a statement timeout for expensive catalog reads",
    "read_key_settings": "the settings that matter, read",
    "connection_room": "how many connections the server takes",
    "wait_class_of": "its wait events / thread states into the shared wait taxonomy",
}
# Attributes an engine must set (non-empty): what the reports and the run say in its words.
ATTRIBUTES: dict[str, str] = {
    "name": "stored in bundles", "title": "for people", "schemes": "DSN schemes", "drivers": "Python drivers",
    "default_port": "connect", "key_settings": "settings that matter (durability, sizing)",
    "log_name": "report vocabulary: WAL / redo log", "buffer_pool_setting": "report vocabulary",
    "per_txn_counters": "report vocabulary: per-transaction counters", "waits_series": "its sampled waits series",
    "stats_series": "its global counters series", "commit_path_settings": "durability verdict",
    "instrumentation": "throwaway server: the instrumentation it starts with",
    "process_names": "profiles: its server processes", "sql_folder": "its SQL folders",
    "isolation_prefix_sql": "the session's isolation statement",
    "parse_plan_frames": "profiles: its parser and planner frames", "parse_plan_advice": "report: parse/plan advice",
    "wait_samplers": "report vocabulary: who sampled its waits",
    "placeholder_style": "native-executor binding: placeholders", "watch_reads": "watch: what it reads",
}
# SQL folders named by Engine.sql_folder: (module, registry) whose value per engine must be a folder of .sql.
SQL_FOLDERS: tuple[tuple[str, str], ...] = (
    ("collectors.sql", "SQL_DIRS"),                     # the sources' SQL, picked by version and product
    ("workloads.tpcc.tpcc_sp", "SQL_DIRS"),             # TPC-C stored procedures
    ("workloads.watch.watch_counters", "SQL_DIRS"),     # a watched server's counters
)
# (module, registry) -> the layer's part of an engine: one line per engine, its value that engine's parts
# record (a frozen dataclass whose fields are the parts, see PART_FIELDS) or, in core, its launcher.
LAYER_PARTS: dict[tuple[str, str], str] = {
    ("diag.core.servers", "LAUNCHERS"): "core: throwaway server start, diag/core/servers/<module>.py",
    ("collectors.engines", "SOURCE_PARTS"): "sources: collectors/<sql_folder>/__init__.py PARTS",
    ("workloads.engines", "WORKLOAD_PARTS"): "workloads: workloads/engines/<module>.py PARTS",
    ("reports.model.engines", "MODEL_PARTS"): "report model: reports/model/engines/<module>.py PARTS",
    ("reports.rules.engines", "RULE_PARTS"): "findings rules: reports/rules/engines/<module>.py PARTS",
}
# (module, registry) -> the part of the engine it holds. Each must have a key per engine.
REGISTRIES: dict[tuple[str, str], str] = {
    **LAYER_PARTS,
    **{k: "its SQL folder (Engine.sql_folder)" for k in SQL_FOLDERS},
}


def _fields(record: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted field name, value) of every field of a parts record, nested records' fields included."""
    out: list[tuple[str, Any]] = []
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out += _fields(value, f"{prefix}{f.name}.")
        else:
            out.append((f"{prefix}{f.name}", value))
    return out


def _part_fields() -> list[tuple[str, str, str]]:
    """(module, registry, field) of every field of the layers' parts records: what an engine must fill."""
    out = []
    for module, name in LAYER_PARTS:
        reg = getattr(importlib.import_module(module), name)
        first = reg[ENGINES[0].name]
        if dataclasses.is_dataclass(first):
            out += [(module, name, f) for f, _ in _fields(first)]
    return out


PART_FIELDS = _part_fields()


def _registry_literals() -> set[tuple[str, str]]:
    """(module, name) of each dict written with ``ENGINE.name`` keys in the product's code outside the
    engine package: the registries that hold a part of an engine."""
    found: set[tuple[str, str]] = set()
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if module.startswith("diag.core.engines"):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, (ast.Assign, ast.AnnAssign)):
                    continue
                value = node.value
                if isinstance(value, ast.DictComp):  # {e.name: ... for e in ENGINES}: covers every engine
                    continue
                if not isinstance(value, ast.Dict) or not value.keys or not all(_engine_key(k) for k in value.keys):
                    continue
                target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                found.add((module, ast.unparse(target)))
    return found


def _engine_key(node: ast.AST | None) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "name" and isinstance(node.value, ast.Name)
            and node.value.id.isupper())


def _engine_ids() -> list[str]:
    return [e.name for e in ENGINES]


@pytest.mark.parametrize("engine", ENGINES, ids=_engine_ids())
@pytest.mark.parametrize("method", sorted(METHODS))
def test_engine_defines_its_methods(engine: Engine, method: str) -> None:
    own = getattr(type(engine), method)
    assert own is not getattr(BaseEngine, method), f"{engine.name} does not define {method}: {METHODS[method]}"


@pytest.mark.parametrize("engine", ENGINES, ids=_engine_ids())
@pytest.mark.parametrize("attr", sorted(ATTRIBUTES))
def test_engine_sets_its_attributes(engine: Engine, attr: str) -> None:
    assert getattr(engine, attr), f"{engine.name} leaves {attr} empty: {ATTRIBUTES[attr]}"


@pytest.mark.parametrize("engine", ENGINES, ids=_engine_ids())
def test_shared_wait_keys_map_into_the_taxonomy(engine: Engine) -> None:
    assert engine.wait_class("CPU") == "cpu" and engine.wait_class("Lock:tuple") == "lock"
    assert engine.wait_class_of("no such event") in WAIT_CLASSES
    assert {engine.wait_label(c) for c in WAIT_CLASSES}, "every class has words"


@pytest.mark.parametrize("module,name", sorted(REGISTRIES), ids=[f"{m}.{n}" for m, n in sorted(REGISTRIES)])
def test_registries_cover_every_engine(module: str, name: str) -> None:
    reg: dict[str, Any] = getattr(importlib.import_module(module), name)
    missing = [e.name for e in ENGINES if e.name not in reg]
    assert not missing, f"{module}.{name} ({REGISTRIES[(module, name)]}) has no entry for {missing}"
    extra = sorted(set(reg) - {e.name for e in ENGINES})
    assert not extra, f"{module}.{name} has entries for engines that do not exist: {extra}"
    for e in ENGINES:
        assert reg[e.name] is not None, f"{module}.{name}[{e.name}] is None"


@pytest.mark.parametrize("engine", ENGINES, ids=_engine_ids())
@pytest.mark.parametrize("module,name,field", PART_FIELDS, ids=[f"{m}.{n}.{f}" for m, n, f in PART_FIELDS])
def test_parts_records_are_filled(engine: Engine, module: str, name: str, field: str) -> None:
    """Every field of an engine's parts record in each layer is set: a callable, a non-empty collection, or a
    flag (a bool may be False)."""
    reg = getattr(importlib.import_module(module), name)
    assert engine.name in reg, f"{module}.{name} has no parts of {engine.name}: {LAYER_PARTS[(module, name)]}"
    value = dict(_fields(reg[engine.name]))[field]
    assert value is not None, f"{module}.{name}[{engine.name}].{field} is None"
    if isinstance(value, (tuple, list, dict, str)) or hasattr(value, "keys"):
        assert value, f"{module}.{name}[{engine.name}].{field} is empty"
    elif not isinstance(value, bool):
        assert callable(value), f"{module}.{name}[{engine.name}].{field} is neither callable nor data"


def test_one_registry_per_layer() -> None:
    """An upper layer keeps one registry of engines (its parts records), not one per part."""
    layers = [m.split(".")[0] if not m.startswith("reports") else ".".join(m.split(".")[:2]) for m, _ in LAYER_PARTS]
    assert len(layers) == len(set(layers)), f"a layer with two engine registries: {sorted(LAYER_PARTS)}"


@pytest.mark.parametrize("engine", ENGINES, ids=_engine_ids())
@pytest.mark.parametrize("module,name", SQL_FOLDERS, ids=[f"{m}.{n}" for m, n in SQL_FOLDERS])
def test_sql_folders_hold_sql(engine: Engine, module: str, name: str) -> None:
    folder: Path = getattr(importlib.import_module(module), name)[engine.name]
    assert folder.is_dir() and any(folder.glob("*.sql")), f"{folder} has no .sql files for {engine.name}"
    assert engine.sql_folder in folder.parts


def test_the_contract_lists_every_registry() -> None:
    """A registry keyed by engine name that is not listed here would be missed by whoever adds an engine."""
    found = _registry_literals()
    listed = {k for k in REGISTRIES if k not in SQL_FOLDERS}
    assert len(found) >= len(LAYER_PARTS), f"the registry finder found too few to be working: {sorted(found)}"
    assert not found - listed, f"registries keyed by engine name missing from CONTRACT: {sorted(found - listed)}"
    assert not listed - found, f"listed registries that are no longer dict literals: {sorted(listed - found)}"


# The whole checklist, as one table (what, where), for whoever adds an engine.
CONTRACT: tuple[tuple[str, str], ...] = (
    *((why, f"Engine.{m}()") for m, why in METHODS.items()),
    *((why, f"Engine.{a}") for a, why in ATTRIBUTES.items()),
    *((why, f"{m}.{n}[engine.name]") for (m, n), why in REGISTRIES.items()),
    *((LAYER_PARTS[(m, n)].split(":")[0], f"{m}.{n}[engine.name].{f}") for m, n, f in PART_FIELDS),
)
