"""The layout is the architecture: families import each other's public names only, and only
one module touches scikit-learn's private names."""

import ast
import pathlib

import sktransformer

ROOT = pathlib.Path(sktransformer.__file__).parent


def _imports(path):
    """Absolute module names imported by ``path``, with the line."""
    package = ".".join(("sktransformer", *path.relative_to(ROOT).parent.parts))
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield module, [alias.name for alias in node.names], node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno


def _family(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "sktransformer" else None


def test_no_family_imports_another_familys_private_module():
    bad = []
    for path in ROOT.rglob("*.py"):
        own = _family(".".join(("sktransformer", *path.relative_to(ROOT).with_suffix("").parts)))
        for module, names, line in _imports(path):
            parts = module.split(".")
            if parts[0] != "sktransformer" or len(parts) < 2:
                continue
            private = (any(p.startswith("_") for p in parts[2:])
                       or any(n.startswith("_") for n in names))
            family = _family(module) or (parts[1] if len(parts) == 2 else None)
            if private and family != own:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not bad, "\n".join(bad)


def test_private_scikit_learn_names_live_in_one_module():
    bad = []
    for path in ROOT.rglob("*.py"):
        if path.name == "_sklearn.py":
            continue
        for module, names, line in _imports(path):
            if module.split(".")[0] != "sklearn":
                continue
            if any(p.startswith("_") for p in module.split(".")) or any(
                    n.startswith("_") for n in names):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module} {names}")
    assert not bad, "\n".join(bad)
