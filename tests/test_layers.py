"""The package's shape: no import cycle among its modules, function-level
imports included, and the lists kept twice for a reason agree."""

from __future__ import annotations

import ast
from pathlib import Path

from wrapper.core.signals import STOP_SIGNALS
from wrapper.process import guardian_waiter as waiter

PACKAGE = Path(__file__).resolve().parent.parent / "wrapper"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(tree: ast.AST, module: str, is_package: bool, modules: set[str]) -> set[str]:
    """The package's modules that ``module`` imports when it runs: at its top
    or inside functions, not in blocks only a type checker reads."""
    found: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for branch in node.orelse:
                visit(branch)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(known(alias.name) or "")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                found.add(known(f"{base}.{alias.name}") or known(base) or "")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found - {"", module}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    names = set(modules)
    return {
        name: _imported(ast.parse(path.read_text()), name, path.name == "__init__.py", names)
        for name, path in modules.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def strong(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                strong(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                group.append(other)
                if other == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            strong(node)
    return groups


def test_the_scan_sees_a_function_level_import() -> None:
    graph = import_graph()
    # The command line imports the run's modules inside its functions only.
    assert "wrapper.supervision.run" in graph["wrapper.cli"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_of_the_package_imports_itself_back() -> None:
    assert cycles(import_graph()) == []


def test_the_waiter_passes_on_the_stop_signals_everyone_else_uses() -> None:
    # The waiter runs without the signal module, so it keeps them as numbers.
    assert tuple(int(sig) for sig in STOP_SIGNALS) == waiter.STOP_SIGNALS
