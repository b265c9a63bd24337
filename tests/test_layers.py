"""The package's shape: no import cycle among its modules, function-level
imports included, and the lists kept twice for a reason agree."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

import wrapper
from wrapper.core.registry import AGENTS
from wrapper.core.signals import STOP_SIGNALS
from wrapper.core.version import VERSION
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
    assert "wrapper.supervision.prepare" in graph["wrapper.cli"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_of_the_package_imports_itself_back() -> None:
    assert cycles(import_graph()) == []


def test_no_layer_imports_the_package_front_door() -> None:
    # The front door imports the layers; a layer that needs something of it
    # (the version) finds it in the core instead.
    graph = import_graph()
    layers = [name for name, path in _modules().items() if path.parent != PACKAGE]
    upward = sorted(name for name in layers if "wrapper" in graph[name])
    assert not upward, f"modules of a layer that import the package's __init__: {upward}"


def test_the_core_keeps_the_version_the_package_is_built_with() -> None:
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]
    assert project["version"] == VERSION == wrapper.__version__


def test_the_waiter_passes_on_the_stop_signals_everyone_else_uses() -> None:
    # The waiter runs without the signal module, so it keeps them as numbers.
    assert tuple(int(sig) for sig in STOP_SIGNALS) == waiter.STOP_SIGNALS


ROOT = PACKAGE.parent
#: Folders of the repository whose paths the documents name.
NAMED_FOLDERS = ("wrapper", "tests", "fixtures", "scripts", "benchmarks", "examples", ".ci")


def named_paths(text: str) -> set[str]:
    """The repository paths a document names in inline code or in links
    (fenced blocks hold examples and sample output, not references)."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    spans = re.findall(r"`([^`\n]+)`|\]\(([^)#\s]+)", prose)
    found = set()
    for code, link in spans:
        for word in (code or link).split():
            path = word.rstrip(".,:;)")
            if path.split("/", 1)[0] in NAMED_FOLDERS and "/" in path:
                found.add(path)
    return found


#: The documents a reader is sent to: the README, CONTRIBUTING and the site's pages.
DOCUMENTS = [
    "README.md",
    "CONTRIBUTING.md",
    *sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").rglob("*.md")),
]


def test_the_documents_name_the_package() -> None:
    for documents in (["CONTRIBUTING.md"], DOCUMENTS):
        named = set().union(*(named_paths((ROOT / d).read_text()) for d in documents))
        assert any(path.startswith("wrapper/") for path in named), documents


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_path_the_documents_name_exists(document: str) -> None:
    named = named_paths((ROOT / document).read_text())
    # A placeholder (<name>), a wildcard or a {a,b} list stands for the files it matches.
    missing = [path for path in sorted(named) if not _matches(path)]
    assert not missing, f"{document} names paths that do not exist: {missing}"


def _matches(path: str) -> bool:
    choices = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", path)
    if choices is not None:
        head, options, tail = choices.groups()
        return all(_matches(head + option + tail) for option in options.split(","))
    return bool(list(ROOT.glob(re.sub(r"<[^>]*>", "*", path).rstrip("/"))))


def test_the_architecture_section_names_every_subpackage() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    section = text.split("## Architecture", 1)[1].split("\n## ", 1)[0]
    subpackages = sorted(
        path.parent.name for path in PACKAGE.glob("*/__init__.py") if path.parent.name != "schemas"
    )
    missing = [name for name in subpackages if f"`wrapper/{name}/`" not in section]
    assert not missing, missing
    modules = {
        path.stem
        for path in PACKAGE.rglob("*.py")
        if path.stem != "__init__" and "schemas" not in path.parts
    }
    # One module per agent: the registry lists them, the section says so.
    agents = {entry.dialect.split(":")[0].rsplit(".", 1)[1] for entry in AGENTS}
    unnamed = sorted(name for name in modules - agents if name not in section)
    assert not unnamed, f"modules the Architecture section does not name: {unnamed}"


def test_every_module_is_one_concept_of_a_readable_size() -> None:
    too_long, unexplained = [], []
    for name, path in sorted(_modules().items()):
        lines = len(path.read_text().splitlines())
        if lines > 700:
            too_long.append(f"{name} ({lines})")
        elif lines > 600 and "One module, though long" not in (
            ast.get_docstring(ast.parse(path.read_text())) or ""
        ):
            unexplained.append(f"{name} ({lines})")
    assert not too_long, f"over 700 lines: {too_long}"
    assert not unexplained, f"over 600 lines without saying why they are one concept: {unexplained}"
