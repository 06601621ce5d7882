"""The shape of the code, checked on its source: layers, engines as objects, sizes.

These read the project's own .py files with :mod:`ast` (no imports, nothing run),
so they fail with the file and line that broke a rule.

- Layers (imports only go down): core (diag/core/: errors, engines, targets, db,
  bundle, schema, servers, processes) -> workloads | sources (collectors), peers
  that do not import each other -> reports (reports/model/ -> reports/rules/ ->
  reports/views/) -> app (the rest of diag/: cli, run, commands). Type-only
  imports (``if TYPE_CHECKING:``) are exempt; an upward import that has to stay
  a while is listed in :data:`KNOWN_UP` with why (none today).
- No import cycle between modules at import time, and no project import inside a
  function (the usual way to dodge a cycle). The one import at run time is the
  command registry, :data:`diag.cli.COMMANDS`: a command's module is imported when
  that command runs, so ``--help`` answers at once. It is checked like an import
  from diag.cli (layers, cycles), and ``importlib.import_module`` is called only
  where :data:`RUNTIME_IMPORTS` says why.
- bench/ (the measurement scripts) sits above the app: it may import any layer, nothing
  imports it, and the two rules above hold in it too. The other rules are for the
  product's code only.
- No engine-name comparison (``engine == "postgres"``, ``"mariadb" in text``,
  ``TABLE["mysql"]``) outside the engine modules in diag/core/engines/.
- No module over :data:`MAX_MODULE_LINES` lines and no function over
  :data:`MAX_FUNCTION_LINES` lines unless its docstring says why ("Long because").
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import diag.core.engines as engines_pkg

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("diag", "collectors", "workloads", "reports")
BENCH = "bench"  # checked for its imports only (see the module docstring)
ENGINE_NAMES = {"postgres", "postgresql", "pg", "mysql", "mariadb"}
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
LONG_REASON = "long because"

# Layer of each module: the first matching prefix wins. The folders are the layers: diag/core/ is the ground
# floor and the rest of diag/ the app; inside reports/, model (what is computed from the bundle) -> rules
# (findings) -> views (what is shown).
LAYERS: tuple[tuple[str, int], ...] = (
    ("diag.core", 0),
    ("workloads", 1),
    ("collectors", 1),
    ("reports.model", 2),
    ("reports.rules", 3),
    ("reports.views", 4),
    ("reports", 2),  # the package itself (empty)
    ("diag", 5),
    (BENCH, 6),
)
LAYER_NAMES = ("core", "workloads and sources", "report model", "report rules", "report views", "app", "bench")
# (importing module, imported module) -> why it still goes up a layer. Each is a debt: the test fails on a new
# one, and on a listed one that no longer exists (take it off the list). None is left: the model's accounting,
# limits, gaps, observer and compare read the steps, CPU use and wait profiles they need from reports/model/
# (steps, cpu, wait_profiles), and the rules import those from there.
KNOWN_UP: dict[tuple[str, str], str] = {}
# Peers in one layer that must not import each other: the workload driver and the sources run side by
# side in a step and meet only in the run (app) and the bundle.
PEERS = (("workloads", "collectors"),)
# (module, function) -> why it may import a module whose name is not written there (a variable). A name
# written as a string must not be a project module's. Only diag.cli imports project modules by name.
RUNTIME_IMPORTS = {
    ("diag.cli", "load_command"): "the command registry: a project command's modules load when it runs",
    ("diag.core.engines.base", "pick_driver"): "the fastest installed third-party driver, tried in turn",
    ("bench.drivers", "_drv"): "the third-party driver under measurement",
    ("bench.drivers", "measure"): "the third-party driver under measurement",
}
REGISTRY_MODULE = "diag.cli"


def _modules(packages: tuple[str, ...] = PACKAGES) -> Iterator[tuple[str, Path]]:
    for pkg in packages:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield ".".join(parts), p


def layer_of(module: str) -> int:
    """The layer number of a dotted module name (see LAYERS); the ``diag`` package itself holds the version."""
    if module == "diag":
        return 0
    for prefix, n in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return n
    raise AssertionError(f"module {module} has no layer: add it to LAYERS")


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                for n in ast.walk(sub):
                    if hasattr(n, "lineno"):
                        lines.add(n.lineno)
    return lines


def _project_imports(module: str, tree: ast.AST) -> Iterator[tuple[ast.stmt, str]]:
    """(node, imported project module) for every import statement in ``tree``."""
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: -node.level] if node.level else []
                names = [".".join(base + ([node.module] if node.module else []))]
            elif node.module:
                names = [node.module]
        for n in names:
            if n.split(".")[0] in (*PACKAGES, BENCH):
                yield node, n


def registry_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of each value of the ``COMMANDS = {...}`` table in ``tree``: the registry's imports."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "COMMANDS" for t in targets):
                out += [(v.lineno, v.value) for v in node.value.values
                        if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return out


def _parsed(packages: tuple[str, ...] = PACKAGES) -> list[tuple[str, Path, ast.Module]]:
    return [(m, p, ast.parse(p.read_text(encoding="utf-8"), filename=str(p))) for m, p in _modules(packages)]


PARSED = _parsed()
WITH_BENCH = PARSED + _parsed((BENCH,))  # for the import rules


def _function_bodies(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_imports_only_go_down() -> None:
    bad = []
    for module, path, tree in WITH_BENCH:
        tc = _type_checking_lines(tree)
        mine = layer_of(module)
        for node, target in _project_imports(module, tree):
            if node.lineno in tc:
                continue
            theirs = layer_of(target)
            if theirs > mine and (module, target) not in KNOWN_UP:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {LAYER_NAMES[mine]} module {module} imports "
                           f"{LAYER_NAMES[theirs]} module {target}")
            pkgs = {module.split(".")[0], target.split(".")[0]}
            if any(pkgs == set(p) for p in PEERS):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {module} imports its peer {target}")
        for line, target in registry_imports(tree):
            if layer_of(target) > mine:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {module}'s command registry names {target}, "
                           f"a {LAYER_NAMES[layer_of(target)]} module")
    assert not bad, "imports that go up a layer:\n" + "\n".join(bad)


def test_known_upward_imports_still_exist() -> None:
    """A debt in KNOWN_UP that was paid (the import is gone) comes off the list, so the list only shrinks."""
    seen = {(module, target) for module, _, tree in PARSED for _, target in _project_imports(module, tree)}
    gone = sorted(set(KNOWN_UP) - seen)
    assert not gone, f"no longer imported, take off KNOWN_UP: {gone}"
    for module, target in KNOWN_UP:
        assert layer_of(target) > layer_of(module), f"{module} -> {target} does not go up: take it off KNOWN_UP"


def test_no_project_import_inside_a_function() -> None:
    bad = []
    for module, path, tree in WITH_BENCH:
        for fn in _function_bodies(tree):
            for node, target in _project_imports(module, fn):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {fn.name}() imports {target}")
    assert not bad, "function-local project imports (import at the top; fix the cycle instead):\n" + "\n".join(bad)


def _import_graph() -> dict[str, set[str]]:
    known = {m for m, _, _ in WITH_BENCH}
    graph: dict[str, set[str]] = {m: set() for m in known}
    for module, _, tree in WITH_BENCH:
        tc = _type_checking_lines(tree)
        in_functions = {id(n) for fn in _function_bodies(tree) for n, _ in _project_imports(module, fn)}
        for node, target in _project_imports(module, tree):
            if node.lineno in tc or id(node) in in_functions:
                continue
            # "from pkg import name" may name a submodule: resolve to the longest known module.
            cands = [target]
            if isinstance(node, ast.ImportFrom):
                cands = [f"{target}.{a.name}" for a in node.names] + [target]
            for c in cands:
                while c and c not in known:
                    c = c.rpartition(".")[0]
                if c and c != module:
                    graph[module].add(c)
        graph[module].update(t for _, t in registry_imports(tree) if t in known)
    return graph


def _import_module_calls(tree: ast.AST) -> Iterator[tuple[str, ast.Call]]:
    """(enclosing function, call) of each ``importlib.import_module(...)``, ``import_module(...)`` or
    ``__import__(...)`` in ``tree`` (``""`` at module level)."""
    def walk(node: ast.AST, fn: str) -> Iterator[tuple[str, ast.Call]]:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
            if isinstance(child, ast.Call):
                f = child.func
                called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if called in ("import_module", "__import__"):
                    yield fn, child
            yield from walk(child, name)
    yield from walk(tree, "")


def test_imports_by_name_only_where_allowed() -> None:
    """Importing by name at run time is how the registry loads a command; anywhere else it would hide an
    import from the layer and cycle checks above."""
    bad = []
    for module, path, tree in WITH_BENCH:
        for fn, call in _import_module_calls(tree):
            arg = call.args[0] if call.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                if arg.value.split(".")[0] not in (*PACKAGES, BENCH):
                    continue  # a third party that may be missing (distributed, a driver)
            elif (module, fn) in RUNTIME_IMPORTS:
                continue
            bad.append(f"{path.relative_to(ROOT)}:{call.lineno}: {fn or 'module level'}() imports by name: "
                           f"{ast.unparse(call)[:80]}")
    assert not bad, "imports by name outside RUNTIME_IMPORTS:\n" + "\n".join(bad)


def test_import_by_name_finder_finds_them() -> None:
    tree = ast.parse("import importlib\ndef f():\n    importlib.import_module('x')\n"
                     "def g():\n    __import__('y')\nh = importlib.import_module('z')\n")
    assert [(fn, c.lineno) for fn, c in _import_module_calls(tree)] == [("f", 3), ("g", 5), ("", 6)]


def test_the_command_registry_names_app_modules_with_a_main() -> None:
    trees = {m: (p, t) for m, p, t in PARSED}
    entries = registry_imports(trees[REGISTRY_MODULE][1])
    assert len(entries) >= 6, f"the registry finder found too few commands in {REGISTRY_MODULE}: {entries}"
    for _, target in entries:
        assert target in trees, f"COMMANDS names {target}, which is not a module"
        assert layer_of(target) == LAYER_NAMES.index("app"), f"{target} is not an app module"
        fns = {n.name for n in trees[target][1].body if isinstance(n, ast.FunctionDef)}
        assert "main" in fns, f"{target} has no main(args, argv)"
    # Only the registry imports project modules by name: every other run-time import names a third party.
    for (module, _), why in RUNTIME_IMPORTS.items():
        assert module == REGISTRY_MODULE or "project" not in why


def test_no_import_cycles() -> None:
    graph = _import_graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    # A package __init__ importing its own submodules is not a cycle worth reporting.
    real = [c for c in cycles if not all(x.startswith(c[0] + ".") or x == c[0] for x in c[1:])]
    assert not real, "import cycles:\n" + "\n".join(" -> ".join(c) for c in real)


def _is_engine_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.lower() in ENGINE_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_engine_literal(e) for e in node.elts)
    return False


def engine_name_comparisons(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, source) of each comparison with, or lookup by, an engine-name literal."""
    out = []
    for node in ast.walk(tree):
        hit = False
        if isinstance(node, ast.Compare):
            hit = any(_is_engine_literal(x) for x in [node.left, *node.comparators])
        elif isinstance(node, ast.Subscript):
            hit = _is_engine_literal(node.slice)
        elif isinstance(node, ast.Dict):
            hit = any(k is not None and _is_engine_literal(k) for k in node.keys)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            hit = bool(node.args) and _is_engine_literal(node.args[0])
        if hit:
            out.append((node.lineno, ast.unparse(node)[:100]))
    return out


def test_engine_comparison_finder_finds_them() -> None:
    tree = ast.parse('a = e == "postgres"\nb = "mariadb" in v.lower()\nc = T["mysql"]\nd = {"pg": 1}\n'
                     'f = e in ("postgres", "postgresql")\ng = x.get("mysql")\nok = e.name == other.name\n')
    assert [ln for ln, _ in engine_name_comparisons(tree)] == [1, 2, 3, 4, 5, 6]


def test_no_engine_name_comparisons_outside_engine_modules() -> None:
    bad = []
    for module, path, tree in PARSED:
        if module.startswith("diag.core.engines"):
            continue
        bad += [f"{path.relative_to(ROOT)}:{ln}: {src}" for ln, src in engine_name_comparisons(tree)]
    assert not bad, f"{len(bad)} engine-name comparisons (ask the engine object instead):\n" + "\n".join(bad)


def test_modules_are_small() -> None:
    bad = []
    for module, path, tree in PARSED:
        n = len(path.read_text(encoding="utf-8").splitlines())
        doc = (ast.get_docstring(tree) or "").lower()
        if n > MAX_MODULE_LINES and LONG_REASON not in doc:
            bad.append(f"{path.relative_to(ROOT)}: {n} lines")
    assert not bad, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(bad)


def test_functions_are_short_or_say_why() -> None:
    bad = []
    for module, path, tree in PARSED:
        for fn in _function_bodies(tree):
            n = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            if n > MAX_FUNCTION_LINES and LONG_REASON not in (ast.get_docstring(fn) or "").lower():
                bad.append(f"{path.relative_to(ROOT)}:{fn.lineno}: {fn.name}() {n} lines")
    assert not bad, f"functions over {MAX_FUNCTION_LINES} lines without a reason:\n" + "\n".join(bad)


@pytest.mark.parametrize("module,layer", [("diag.core.engines.postgres", 0), ("collectors.pg.stats", 1),
                                          ("reports.model.accounting", 2), ("reports.rules.waits", 3),
                                          ("reports.views.render", 4), ("diag.run", 5), ("workloads.driver", 1),
                                          ("workloads.native.native", 1), ("diag", 0), ("diag.core.supervisor", 0),
                                          ("diag.commands.report", 5), ("bench.pairs", 6)])
def test_layer_map(module: str, layer: int) -> None:
    assert layer_of(module) == layer


def _engine_key(node: ast.AST | None) -> str | None:
    """``POSTGRES`` for a dict key written ``POSTGRES.name``."""
    if isinstance(node, ast.Attribute) and node.attr == "name" and isinstance(node.value, ast.Name) \
            and node.value.id.isupper():
        return node.value.id
    return None


def test_every_engine_registry_covers_every_engine() -> None:
    """A registry keyed by ``ENGINE.name`` that forgets an engine would fail only on that engine's targets."""
    # The engine objects' module-level names: POSTGRES, MYSQL.
    names = {n for n, v in vars(engines_pkg).items() if any(v is e for e in engines_pkg.ENGINES)}
    found, bad = 0, []
    for module, path, tree in PARSED:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Dict) or not node.keys:
                continue
            keys = {_engine_key(k) for k in node.keys}
            if None in keys:
                continue
            found += 1
            if keys != names:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: keys {sorted(keys)}, engines {sorted(names)}")
    assert found >= 5, "the registry finder found too few registries to be working"
    assert not bad, "engine registries missing an engine:\n" + "\n".join(bad)
