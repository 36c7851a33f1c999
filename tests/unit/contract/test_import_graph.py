"""The import graph, read from the code with `ast`: no service imports another service's
package (shared machinery lives in libs/), libraries import no service, the CLI uses only a
service's public operator module, and no package has an import circle (type-only imports count:
a circle for the type checker is a circle for the reader). The ledger's folders are named for what
they own (no `store/` or `stores/`), it has one outbox and one audit-trail writer, and recall finds
a session's scope through a scope module, not through ingestion's writes."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PUBLIC = "operator"
"""The one module of a service an operator tool may import (`tavern_<service>.operator`)."""


def packages(root: Path, area: str) -> list[Path]:
    """The `tavern_*` packages of libs/*/ and services/*/, or the CLI's (cli/tavern_cli)."""
    pattern = "tavern_*" if area == "cli" else "*/tavern_*"
    return sorted(p for p in (root / area).glob(pattern) if (p / "__init__.py").exists())


def module_files(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    found = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: set[str] | None = None) -> Iterator[str]:
    """The modules `name` (at `path`) imports; `from a import b` names `a.b` when it is one of
    `known` modules, else `a`. Relative imports are resolved."""
    known = known or set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".") if is_package else name.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield sub if sub in known else base


def circles(package: Path) -> list[list[str]]:
    """Every set of modules of `package` that import each other round (Tarjan's SCCs)."""
    files = module_files(package)
    graph = {
        m: {i for i in imported(m, f, set(files)) if i in files and i != m}
        for m, f in files.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def foreign_imports(root: Path) -> list[str]:
    """`module -> import` of every service or library that imports a service not its own."""
    services = {p.name for p in packages(root, "services")}
    wrong = []
    for package in packages(root, "services") + packages(root, "libs"):
        for name, path in module_files(package).items():
            for target in set(imported(name, path)):
                top = target.split(".")[0]
                if top in services and top != package.name:
                    wrong.append(f"{name} -> {target}")
    return sorted(wrong)


def private_uses(root: Path) -> list[str]:
    """`module -> import` of every CLI import of a service module other than its public one."""
    services = {p.name for p in packages(root, "services")}
    wrong = []
    for package in packages(root, "cli"):
        for name, path in module_files(package).items():
            for target in set(imported(name, path)):
                parts = target.split(".")
                if parts[0] in services and parts[1:] != [PUBLIC]:
                    wrong.append(f"{name} -> {target}")
    return sorted(wrong)


def test_no_service_imports_another_and_no_library_imports_a_service() -> None:
    assert foreign_imports(REPO) == []


def test_the_cli_uses_only_the_public_operator_module_of_a_service() -> None:
    assert private_uses(REPO) == []


def test_no_package_has_an_import_circle() -> None:
    found = {
        p.name: circles(p) for area in ("libs", "services", "cli") for p in packages(REPO, area)
    }
    assert {name: c for name, c in found.items() if c} == {}


# --- the checks catch what they are for -----------------------------------------------------


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checks_find_a_foreign_import_a_private_use_and_a_circle(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "services/a/tavern_a/__init__.py": "",
            "services/a/tavern_a/one.py": "from tavern_a import two\n",
            "services/a/tavern_a/two.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .one import x\n"
            ),
            "services/a/tavern_a/operator.py": "",
            "services/b/tavern_b/__init__.py": "",
            "services/b/tavern_b/uses.py": "from tavern_a.one import helper\n",
            "libs/l/tavern_l/__init__.py": "import tavern_b.uses\n",
            "cli/tavern_cli/__init__.py": "",
            "cli/tavern_cli/ok.py": "from tavern_a.operator import thing\n",
            "cli/tavern_cli/bad.py": "from tavern_a import one\n",
        },
    )
    assert foreign_imports(root) == ["tavern_b.uses -> tavern_a.one", "tavern_l -> tavern_b.uses"]
    assert private_uses(root) == ["tavern_cli.bad -> tavern_a"]
    assert circles(root / "services/a/tavern_a") == [["tavern_a.one", "tavern_a.two"]]


# --- the ledger's rooms: named for what they own, one outbox, one audit-trail writer ----------

LEDGER = REPO / "services/ledger/tavern_ledger"
VAGUE_FOLDERS = {"store", "stores"}
"""Folder names that say nothing of what they hold (the ledger had both, one letter apart)."""
BULK_WRITERS = {
    "tavern_ledger.evidence.ingest": "one statement per ingestion part: rows, audits, facts",
    "tavern_ledger.evidence.portable": "an import restores exported audit entries with their ids",
}
"""Modules besides `audit` and `outbox` that insert into those tables, and why."""


def vague_folders(package: Path) -> list[str]:
    """Folders of the package named `store/` or `stores/`."""
    return sorted(
        p.relative_to(package).as_posix()
        for p in package.rglob("*")
        if p.is_dir() and p.name in VAGUE_FOLDERS
    )


def named_like(package: Path, word: str) -> list[str]:
    """Modules and packages of `package` whose own name contains `word`."""
    return sorted(m for m in module_files(package) if word in m.rsplit(".", 1)[-1])


def tables_like(package: Path, word: str) -> list[str]:
    """Tables of the `ledger` schema whose name contains `word`: those the migrations create
    and do not drop, and those the code names."""
    table = rf"ledger\.(\w*{word}\w*)"
    live: set[str] = set()
    for sql in sorted((package / "sql").glob("*.sql")):
        text = sql.read_text(encoding="utf-8").lower()
        live |= set(re.findall(rf"create table (?:if not exists )?{table}", text))
        live -= set(re.findall(rf"drop table (?:if exists )?{table}", text))
    for path in module_files(package).values():
        live |= set(re.findall(rf"\b{table}", path.read_text(encoding="utf-8").lower()))
    return sorted(live)


def writers_of(package: Path, table: str) -> list[str]:
    """Modules of the package that insert into `ledger.<table>`."""
    insert = re.compile(rf"insert into ledger\.{table}\b", re.IGNORECASE)
    files = module_files(package)
    return sorted(m for m, p in files.items() if insert.search(p.read_text(encoding="utf-8")))


def test_the_ledger_has_no_folder_named_store_or_stores() -> None:
    assert vague_folders(LEDGER) == []


def test_the_ledger_has_one_outbox_that_only_ingestion_writes_beside_it() -> None:
    assert named_like(LEDGER, "outbox") == ["tavern_ledger.outbox"]
    assert tables_like(LEDGER, "outbox") == ["outbox"]
    assert set(writers_of(LEDGER, "outbox")) <= {"tavern_ledger.outbox", *BULK_WRITERS}


def test_the_ledger_has_one_audit_trail_writer() -> None:
    assert named_like(LEDGER, "audit") == ["tavern_ledger.audit"]
    assert tables_like(LEDGER, "audit") == ["audit"]
    assert set(writers_of(LEDGER, "audit")) <= {"tavern_ledger.audit", *BULK_WRITERS}


def test_recall_resolves_its_scope_without_ingestions_writes() -> None:
    files = module_files(LEDGER)
    recall = [m for m in files if m.startswith("tavern_ledger.recall")]
    uses = {i for m in recall for i in imported(m, files[m], set(files))}
    assert "tavern_ledger.scopes.evidence" in uses
    assert "tavern_ledger.evidence.ingest" not in uses


def test_the_ledger_checks_find_vague_folders_a_second_outbox_and_audit_writer(
    tmp_path: Path,
) -> None:
    package = (
        _tree(
            tmp_path,
            {
                "tavern_ledger/__init__.py": "",
                "tavern_ledger/outbox.py": "Q = 'INSERT INTO ledger.outbox (msg_id) VALUES ($1)'\n",
                "tavern_ledger/audit.py": "Q = 'insert into ledger.audit (op) values ($1)'\n",
                "tavern_ledger/store/__init__.py": "",
                "tavern_ledger/stores/__init__.py": "",
                "tavern_ledger/stores/outbox.py": "Q = 'INSERT INTO ledger.store_outbox (id)'\n",
                "tavern_ledger/stores/audit.py": "Q = 'INSERT INTO ledger.audit (op)'\n",
                "tavern_ledger/sql/001_init.sql": (
                    "CREATE TABLE ledger.outbox (id int);\n"
                    "CREATE TABLE ledger.tool_audit (id int);\n"
                    "CREATE TABLE ledger.old_outbox (id int);\nDROP TABLE ledger.old_outbox;\n"
                ),
            },
        )
        / "tavern_ledger"
    )
    assert vague_folders(package) == ["store", "stores"]
    assert named_like(package, "outbox") == ["tavern_ledger.outbox", "tavern_ledger.stores.outbox"]
    assert tables_like(package, "outbox") == ["outbox", "store_outbox"]
    assert named_like(package, "audit") == ["tavern_ledger.audit", "tavern_ledger.stores.audit"]
    assert tables_like(package, "audit") == ["audit", "tool_audit"]
    assert writers_of(package, "audit") == ["tavern_ledger.audit", "tavern_ledger.stores.audit"]
