"""The package's layering: no import circles, and no module imports from a layer above it.

Layers, bottom to top (``docs/design.md`` draws them)::

    guided.errors                      imports nothing from the project
    guided.fsm.kernels                 numba kernels: leaves (only each other)
    guided.fsm                         automata, vocabularies, token indexes
    guided.grammars                    JSON Schema and lark grammars
    contract                           specs, compiler, matcher, grammar_matcher,
                                       unique_items, tool_calls, thinking, bitmask,
                                       batch, budget, processor
    guided.decoding                    generate, beam search, speculative decoding
    guided.steering                    bias, penalties, DExperts, classifier guidance
    guided.watermark                   on the contract only (not decoding / steering)
    guided.integrations                serving engines (vLLM): the contract and the watermark
    guided.models                      the default model
    guided.cli, guided (the package)   on top

Every import counts, at module level or inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The source folders and the packages they install as (pyproject.toml's package-dir).
FOLDERS = {"guided": "guided", "fsm": "guided.fsm", "grammars": "guided.grammars", "watermark": "guided.watermark"}
CONTRACT = {"specs", "compiler", "matcher", "grammar_matcher", "unique_items", "bitmask", "processor", "batch",
            "tool_calls", "thinking", "budget"}

# layer -> the layers it may import from (itself included)
BELOW = ["errors", "kernels", "fsm", "grammars", "contract", "decoding", "steering"]
ALLOWED = {
    "errors": set(),
    "kernels": {"kernels"},
    "fsm": {"errors", "kernels", "fsm"},
    "grammars": {"errors", "kernels", "fsm", "grammars"},
    "contract": {"errors", "kernels", "fsm", "grammars", "contract"},
    "decoding": {"errors", "kernels", "fsm", "grammars", "contract", "decoding"},
    "steering": {"errors", "kernels", "fsm", "grammars", "contract", "decoding", "steering"},
    "watermark": {"errors", "kernels", "fsm", "grammars", "contract", "watermark"},
    "integrations": {"errors", "kernels", "fsm", "grammars", "contract", "watermark", "integrations"},
    "models": {"errors", "kernels", "fsm", "grammars", "contract", "decoding", "steering", "watermark", "models"},
    "top": {"errors", "kernels", "fsm", "grammars", "contract", "decoding", "steering", "watermark", "integrations",
            "models", "top"},
}


def _modules() -> dict[str, Path]:
    mods = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join([package, *parts])] = path
    return mods


MODULES = _modules()


def layer(module: str) -> str:
    parts = module.split(".")
    if module == "guided.errors":
        return "errors"
    if parts[:3] == ["guided", "fsm", "kernels"]:
        return "kernels"
    if len(parts) == 1:
        return "top"
    sub = parts[1]
    if sub in ("fsm", "grammars", "decoding", "steering", "watermark", "integrations", "models"):
        return sub
    if sub in CONTRACT:
        return "contract"
    return "top"  # guided.cli


def imports(module: str) -> set[str]:
    """The project modules ``module`` imports, anywhere in its code."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = base + ("." + node.module if node.module else "")
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in MODULES and m != module}


GRAPH = {m: imports(m) for m in MODULES}


def test_the_source_folders_hold_modules():
    assert "guided.fsm.dfa" in MODULES and "guided.grammars.json_schema.compiler" in MODULES
    assert "guided.watermark.detector" in MODULES and "guided.fsm.kernels" in MODULES


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_from_a_layer_above_it(module):
    mine = layer(module)
    above = sorted(f"{m} ({layer(m)})" for m in GRAPH[module] if layer(m) not in ALLOWED[mine])
    assert not above, f"{module} ({mine}) imports from a layer above it: {above}"


def test_no_import_circles():
    # Tarjan's strongly connected components over the import graph.
    index, low, on_stack, stack, circles = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not circles, f"import circles: {circles}"
