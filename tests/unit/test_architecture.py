"""The package layering of docs/architecture.md, checked on the source.

Each service (``services/<svc>/sundial/<svc>/``) is deployed on its own, so it may import
the ``sundial`` libraries and its own package, never another service's: what two services
share lives in ``libs/sundial/``. The modules are parsed, not imported, so every import is
seen, those inside functions and ``TYPE_CHECKING`` blocks included.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = sorted(path.name for path in (ROOT / "services").iterdir() if path.is_dir())


@dataclass(frozen=True)
class Violation:
    line: int
    imported: str

    def describe(self, module: str) -> str:
        return f"{module}:{self.line} imports {self.imported}"


def _module_name(path: Path, service: str) -> str:
    """``sundial.api.store._x`` for services/api/sundial/api/store/_x.py."""
    parts = path.relative_to(ROOT / "services" / service).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module an ``ImportFrom`` names, relative forms resolved."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join([*base, *([node.module] if node.module else [])])


def _service_of(name: str) -> str | None:
    """The service whose package ``name`` is or is inside, or None."""
    parts = name.split(".")
    if len(parts) >= 2 and parts[0] == "sundial" and parts[1] in SERVICES:
        return parts[1]
    return None


def foreign_imports(
    source: str, *, service: str, module: str, is_package: bool = False
) -> list[Violation]:
    """Every import in ``source`` (the module ``module`` of ``service``) of another
    service's package."""
    found: list[Violation] = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node, module, is_package)
            names = [target]
            if target == "sundial":  # from sundial import executor
                names = [f"sundial.{alias.name}" for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names = [node.args[0].value]
        for name in names:
            owner = _service_of(name)
            if owner is not None and owner != service:
                found.append(Violation(getattr(node, "lineno", 0), name))
    return found


def _modules(service: str) -> list[Path]:
    return sorted((ROOT / "services" / service / "sundial" / service).rglob("*.py"))


def test_every_service_has_modules_to_check() -> None:
    assert SERVICES == ["api", "executor", "scheduler"]
    for service in SERVICES:
        assert len(_modules(service)) > 5, service


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_imports_no_other_service(service: str) -> None:
    offences: list[str] = []
    for path in _modules(service):
        module = _module_name(path, service)
        for violation in foreign_imports(
            path.read_text(),
            service=service,
            module=module,
            is_package=path.name == "__init__.py",
        ):
            offences.append(violation.describe(str(path.relative_to(ROOT))))
    assert not offences, (
        "a service imports another service's package (move what they share into "
        "libs/sundial/):\n  " + "\n  ".join(offences)
    )


@pytest.mark.parametrize(
    ("source", "module", "imported"),
    [
        ("from sundial.executor.targets import HttpCaller", "", "sundial.executor.targets"),
        ("import sundial.scheduler.store", "", "sundial.scheduler.store"),
        ("import sundial.executor as ex", "", "sundial.executor"),
        ("from sundial import core, executor", "", "sundial.executor"),
        ("from ..executor import model", "", "sundial.executor"),
        ("from ... import scheduler", "sundial.api.store._rows", "sundial.scheduler"),
        ("def f():\n    from sundial.scheduler import model", "", "sundial.scheduler"),
        ("importlib.import_module('sundial.executor.app')", "", "sundial.executor.app"),
    ],
)
def test_the_check_sees_each_form_of_import(source: str, module: str, imported: str) -> None:
    found = foreign_imports(source, service="api", module=module or "sundial.api.notifier")
    assert [v.imported for v in found] == [imported]


@pytest.mark.parametrize(
    "source",
    [
        "from sundial.api.store import queries",
        "from . import store",
        "from .store import queries",
        "import sundial.targets",
        "from sundial import core, targets",
        "import sundial.executorish",
        "import sundial",
    ],
)
def test_own_package_and_libraries_pass(source: str) -> None:
    assert foreign_imports(source, service="api", module="sundial.api.notifier") == []
