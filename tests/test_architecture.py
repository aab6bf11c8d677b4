"""The dependency direction between packages and pipeline's rooms, and no import cycles (read from the source)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("models", "grader", "training", "pipeline")
ROOMS = ("pipeline.retrieval", "pipeline.corrective", "pipeline.service", "pipeline.cli")
# what each unit may import (besides the standard library and third-party packages)
ALLOWED = {
    "models": {"models"},
    "grader": {"models", "grader"},
    "training": {"models", "grader", "training"},
    "pipeline": set(),
    "pipeline.retrieval": {"models", "grader", "pipeline.retrieval"},
    "pipeline.corrective": {"models", "grader", "pipeline.retrieval", "pipeline.corrective"},
    "pipeline.service": {"models", "grader", "pipeline.retrieval", "pipeline.corrective", "pipeline.service"},
    "pipeline.cli": {"models", "grader", *ROOMS},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _unit(module: str) -> str | None:
    for room in ROOMS:
        if module == room or module.startswith(room + "."):
            return room
    top = module.split(".")[0]
    return top if top in PACKAGES else None


def _imports(path: Path, module_level_only: bool = False) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if module_level_only else ast.walk(tree)
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            out += [f"{node.module}.{a.name}" for a in node.names]
    return out


def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_pipeline_has_only_its_four_rooms():
    flat = sorted(p.name for p in (ROOT / "pipeline").glob("*.py") if p.name != "__init__.py")
    assert flat == [], f"modules outside a room: {flat}"
    for room in ROOMS:
        init = ROOT / room.replace(".", "/") / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))), f"{init} needs a docstring"


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_dependency_direction(path):
    unit = _unit(_module_name(path))
    assert unit is not None
    bad = sorted({m for m in _imports(path) if (u := _unit(m)) is not None and u not in ALLOWED[unit]})
    assert not bad, f"{path.relative_to(ROOT)} ({unit}) may not import {bad}"


def test_no_import_cycles_between_modules():
    modules = {_module_name(p): p for p in _sources()}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for imported in _imports(path, module_level_only=True):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            inside = name.startswith(imported + ".") or imported == name.rpartition(".")[0]
            if imported and imported != name and not inside:
                targets.add(imported)
        graph[name] = targets
    state: dict[str, int] = {}
    cycles = []

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert not cycles, f"import cycles: {cycles}"


def test_the_rules_catch_a_violation(tmp_path):
    """The checker itself: a retrieval module importing the service is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("from pipeline.service.app import create_app\n", encoding="utf-8")
    imported = _imports(bad)
    assert "pipeline.service" in {_unit(m) for m in imported}
    assert not {_unit(m) for m in imported} <= ALLOWED["pipeline.retrieval"]


def test_the_packages_type_check(tmp_path):
    """mypy with the project's settings (pyproject.toml) finds nothing: the annotations are kept true."""
    import subprocess
    import sys

    pytest.importorskip("mypy")
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]
