"""ARCHITECTURE.md's rules, checked on the imports of every module (read with ``ast``).

Every import counts: module level, inside functions, under ``TYPE_CHECKING``. The rule
tables are read from ARCHITECTURE.md itself, so the document and the code cannot drift.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("compiler", "logs", "search_space", "sim", "cost_model", "autotune")
TOP = ("autotune", "autotune._tune", "autotune._options", "autotune._apply_history")
MAX_LINES = 600


# ---- reading the code ----------------------------------------------------------------------------
def modules(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under the packages."""
    out: dict[str, Path] = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
        # a compiled extension (setup.py: search_space/_cwalk.c) is a leaf: it imports
        # nothing of the project; its C source stands for it
        for path in sorted((root / pkg).rglob("*.c")):
            out[".".join(path.relative_to(root).with_suffix("").parts)] = path
    return out


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def imports(mods: Mapping[str, Path]) -> dict[str, dict[str, bool]]:
    """Module -> {project module it imports: whether only under ``TYPE_CHECKING``}."""

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, dict[str, bool]] = {}
    for mod, path in mods.items():
        if path.suffix == ".c":  # a compiled leaf
            edges[mod] = {}
            continue
        is_pkg = path.name == "__init__.py"
        out: dict[str, bool] = {}

        def add(target: str | None, annotation_only: bool, mod: str = mod,
                out: dict[str, bool] = out) -> None:
            if target is not None and target != mod:
                out[target] = out.get(target, True) and annotation_only

        def visit(node: ast.AST, annotation_only: bool, mod: str = mod, is_pkg: bool = is_pkg
                  ) -> None:
            if isinstance(node, ast.If) and _type_checking(node):
                for child in node.body:
                    visit(child, True)
                for child in node.orelse:
                    visit(child, annotation_only)
                return
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(resolve(alias.name), annotation_only)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    add(sub if sub in mods else resolve(source), annotation_only)
            for child in ast.iter_child_nodes(node):
                visit(child, annotation_only)

        visit(ast.parse(path.read_text(), str(path)), False)
        edges[mod] = out
    return edges


def cycles(edges: Mapping[str, Iterable[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(edges.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(edges.get(w, ()))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.add(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(frozenset(comp))
    return found


def room(mod: str) -> str:
    """The rule unit of a module: its package, or for autotune its room."""
    parts = mod.split(".")
    if parts[0] != "autotune":
        return parts[0]
    if mod in TOP:
        return "autotune"
    if len(parts) > 1 and not parts[1].startswith("_"):
        return f"autotune.{parts[1]}"
    return "autotune"


def violations(edges: Mapping[str, Mapping[str, bool]], packages: Mapping[str, set[str]],
               rooms: Mapping[str, set[str]]) -> list[str]:
    """Imports the rules forbid, as ``"a -> b"``."""
    bad: list[str] = []
    for mod, targets in sorted(edges.items()):
        src_pkg, src_room = mod.split(".")[0], room(mod)
        for target in sorted(targets):
            dst_pkg, dst_room = target.split(".")[0], room(target)
            if src_pkg != dst_pkg:
                if dst_pkg not in packages.get(src_pkg, set()):
                    bad.append(f"{mod} -> {target}")
                continue
            if src_pkg != "autotune" or src_room == dst_room:
                continue
            if src_room == "autotune":
                allowed = set(rooms) - {"autotune.commands", "autotune.cli"}
            else:
                allowed = rooms.get(src_room, set())
            if dst_room not in allowed:
                bad.append(f"{mod} -> {target}")
    return bad


# ---- reading ARCHITECTURE.md ---------------------------------------------------------------------
def table(section: str) -> list[list[str]]:
    """Rows (cells stripped of backticks) of the first table under ``## <section>``."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    m = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, f"ARCHITECTURE.md has no section {section!r}"
    rows = [line for line in m.group(1).splitlines() if line.startswith("|")]
    return [[c.strip().strip("`") for c in r.strip("|").split("|")] for r in rows[2:]]


def rule_table(section: str) -> dict[str, set[str]]:
    return {r[0]: {x.strip() for x in r[1].split(",") if x.strip()} for r in table(section)}


@pytest.fixture(scope="module")
def edges() -> dict[str, dict[str, bool]]:
    return imports(modules(ROOT, PACKAGES))


# ---- the rules -----------------------------------------------------------------------------------
def test_no_import_cycle_but_the_documented_ones(edges: dict[str, dict[str, bool]]) -> None:
    allowed = {frozenset(x.strip() for x in r[0].split(",")) for r in table("Cycles")}
    found = set(cycles(edges))
    assert found <= allowed, f"import cycles: {[sorted(c) for c in found - allowed]}"
    assert found == allowed, f"listed in ARCHITECTURE.md but gone: {allowed - found}"
    # the documented ones are annotation-only: at run time nothing is circular
    runtime = {m: [t for t, ann in ts.items() if not ann] for m, ts in edges.items()}
    assert cycles(runtime) == []


def test_imports_follow_the_rules(edges: dict[str, dict[str, bool]]) -> None:
    packages = rule_table("Rules: packages")
    assert set(packages) == set(PACKAGES)
    rooms = rule_table("Rules: rooms of autotune")
    assert violations(edges, packages, rooms) == []


def test_every_autotune_room_is_documented(edges: dict[str, dict[str, bool]]) -> None:
    rooms = set(rule_table("Rules: rooms of autotune")) | {"autotune"}
    assert {room(m) for m in edges if m.startswith("autotune")} <= rooms


def test_no_module_over_600_lines_unless_documented() -> None:
    listed = {r[0] for r in table("Large modules")}
    big = {str(p.relative_to(ROOT)) for p in modules(ROOT, PACKAGES).values()
           if p.suffix == ".py" and len(p.read_text().splitlines()) > MAX_LINES}
    assert big <= listed, f"over {MAX_LINES} lines, not in ARCHITECTURE.md: {sorted(big - listed)}"
    assert listed <= big, f"listed as large but no longer: {sorted(listed - big)}"


# ---- the checks can fail -------------------------------------------------------------------------
def test_the_checker_sees_cycles_and_forbidden_imports(tmp_path: Path) -> None:
    (tmp_path / "compiler").mkdir()
    (tmp_path / "compiler" / "__init__.py").write_text("")
    (tmp_path / "compiler" / "a.py").write_text("def f():\n    from compiler.b import g\n")
    (tmp_path / "compiler" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from compiler.a import f\n"
        "import sim\n")
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "__init__.py").write_text("from . import x\n")
    (tmp_path / "sim" / "x.py").write_text("from compiler import a\n")
    e = imports(modules(tmp_path, ("compiler", "sim")))
    assert e["compiler.a"] == {"compiler.b": False}
    assert e["compiler.b"] == {"compiler.a": True, "sim": False}
    assert e["sim"] == {"sim.x": False} and e["sim.x"] == {"compiler.a": False}
    assert set(map(frozenset, [{"compiler.a", "compiler.b", "sim", "sim.x"}])) == set(cycles(e))
    assert violations(e, {"compiler": set(), "sim": {"compiler"}}, {}) == ["compiler.b -> sim"]


def test_rooms_of_autotune() -> None:
    assert room("autotune._tune") == "autotune"
    assert room("autotune.sampling._guided") == "autotune.sampling"
    assert room("autotune.commands.tune_cmds") == "autotune.commands"
    rooms = {"autotune.job": set(), "autotune.report": {"autotune.job"},
             "autotune.commands": set()}
    e = {"autotune.job._state": {"autotune.report._result": False},
         "autotune.report._curve": {"autotune.job._state": True},
         "autotune._tune": {"autotune.commands._common": False}}
    assert violations(e, {"autotune": set()}, rooms) == [
        "autotune._tune -> autotune.commands._common",
        "autotune.job._state -> autotune.report._result"]


def test_project_code_imports_no_moved_or_missing_module() -> None:
    """An import of ``autotune._commands._common`` (a path that moved, kept only for users
    with a DeprecationWarning) resolves to the package in the rules above and would pass
    them: the project's own code must name the modules that exist."""
    mods = modules(ROOT, PACKAGES)
    stale = []
    for mod, path in mods.items():
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.split(".")[0] in PACKAGES and name not in mods:
                    stale.append(f"{mod} imports {name}")
    assert stale == []
