"""Which third-party distributions a piece of code imports.

Import names and PyPI names often differ (`yaml` is PyYAML, `Crypto` is pycryptodome); the
table below covers the common ones, and any other name is assumed to be its own
distribution. The standard library never needs installing.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

from knowbench.builders.repository import static_names, static_truth
from knowbench.parsing import dotted_name, parse_python

IMPORT_TO_DISTRIBUTION = {
    "Crypto": "pycryptodome", "Cryptodome": "pycryptodomex", "OpenSSL": "pyOpenSSL",
    "PIL": "Pillow", "attr": "attrs", "bs4": "beautifulsoup4", "cv2": "opencv-python-headless",
    "dateutil": "python-dateutil", "dotenv": "python-dotenv", "google.protobuf": "protobuf",
    "jwt": "PyJWT", "magic": "python-magic", "nacl": "PyNaCl", "sklearn": "scikit-learn",
    "yaml": "PyYAML", "zmq": "pyzmq", "absl": "absl-py", "mpl_toolkits": "matplotlib",
    "pkg_resources": "setuptools", "Levenshtein": "python-Levenshtein", "serial": "pyserial",
    "usb": "pyusb", "git": "GitPython", "slugify": "python-slugify", "phe": "phe",
    "gmpy2": "gmpy2", "hdwallet": "hdwallet", "jks": "pyjks", "blake3": "blake3",
    "chinese_calendar": "chinesecalendar", "holidays": "holidays", "faker": "Faker",
    "typing_extensions": "typing_extensions", "backports": "backports.zoneinfo",
    "freezegun": "freezegun", "hypothesis": "hypothesis", "_pytest": "pytest", "py": "py",
    "skimage": "scikit-image", "docx": "python-docx", "pptx": "python-pptx", "fontTools": "fonttools",
    "apiclient": "google-api-python-client", "googleapiclient": "google-api-python-client",
    "google.auth": "google-auth", "google.oauth2": "google-auth", "google.cloud.storage": "google-cloud-storage",
    "Bio": "biopython", "MySQLdb": "mysqlclient", "psycopg2": "psycopg2-binary", "socks": "PySocks",
    "jose": "python-jose", "win32api": "pywin32", "win32con": "pywin32", "IPython": "ipython",
    "osgeo": "GDAL", "markdown": "Markdown",
}
_NOT_INSTALLABLE = frozenset({"__main__", "conftest", "solution", "knowbench_test"})


def import_roots(code: str, required_only: bool = False) -> set[str]:
    """Top-level module names imported (absolutely) anywhere in `code`.

    With `required_only`, only the imports that execute are kept (see `imported_modules`)."""
    return {name.split(".")[0] for name in imported_modules(code, required_only)}


def imported_modules(code: str, required_only: bool = False) -> set[str]:
    """Dotted module names imported (absolutely) anywhere in `code`.

    With `required_only`, imports that never execute or need no installing are left out:
    imports guarded by `try: ... except ImportError` (optional dependencies, such as `gmpy`
    in ecdsa's tests); branches that are dead on this interpreter (`if False:`, `if
    TYPE_CHECKING:`, `if sys.version_info < (3,):`, `if PY2:` where `PY2` is assigned such a
    test or follows the compat modules' `PY2`/`PY3` naming, `sys.platform`/`os.name` tests); and modules the code creates itself (a test that
    writes `foo.py` or `foo/__init__.py` and imports `foo`, or puts `foo` in `sys.modules`)."""
    try:
        tree = parse_python(code)
    except SyntaxError:
        return set()
    skipped: set[int] = set()
    if required_only:
        constants = static_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
                skipped |= {id(inner) for statement in node.body for inner in ast.walk(statement)}
            elif isinstance(node, ast.If | ast.IfExp):
                value = static_truth(node.test, constants)
                dead = node.body if value is False else node.orelse if value is True else []
                dead = dead if isinstance(dead, list) else [dead]
                skipped |= {id(inner) for statement in dead for inner in ast.walk(statement)}
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("importorskip", "import_module") and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            names.add(node.args[0].value)  # pytest.importorskip("dateparser")
    if required_only:
        created = created_modules(tree)
        names = {name for name in names if name.split(".")[0] not in created}
    return names


def created_modules(tree: ast.AST) -> set[str]:
    """Top-level module names that the code makes itself: string constants naming a file
    `NAME.py` (or `NAME.pyc`, `NAME/__init__.py`, any path ending so), modules built with
    `ModuleType("NAME")`, and `sys.modules["NAME"] = ...` assignments."""
    made: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 500:
            parts = [p for p in re.split(r"[\\/]", node.value.strip()) if p]
            if not parts:
                continue
            last = parts[-1]
            if last in ("__init__.py", "__init__.pyc") and len(parts) > 1 and parts[-2].isidentifier():
                made.add(parts[-2])
            elif re.fullmatch(r"[A-Za-z_]\w*\.pyc?", last):
                made.add(last.rsplit(".", 1)[0])
        elif isinstance(node, ast.Call | ast.BinOp) and _path_pieces(node)[-2:-1] and \
                _path_pieces(node)[-1] in ("__init__.py", "__init__.pyc") and _path_pieces(node)[-2].isidentifier():
            made.add(_path_pieces(node)[-2])  # os.path.join(d, "pkg", "__init__.py"), d / "pkg" / "__init__.py"
        elif isinstance(node, ast.Call) and _callee(node.func) == "ModuleType" and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            made.add(node.args[0].value.split(".")[0])
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and dotted_name(target.value) == "sys.modules" and \
                        isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):
                    made.add(target.slice.value.split(".")[0])
    return made


def _path_pieces(node: ast.expr) -> list[str]:
    """The string constants joined into a path by `os.path.join(...)` or `a / "b" / "c"`."""
    if isinstance(node, ast.Call):
        items: list[ast.expr] = list(node.args)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        items = []
        while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            items.insert(0, node.right)
            node = node.left
        items.insert(0, node)
    else:
        return []
    return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]


def _callee(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError", "Exception")
               for n in names)


def third_party(roots: set[str]) -> set[str]:
    """The roots that are neither the standard library nor knowbench's own runtime names."""
    return {root for root in roots if root not in sys.stdlib_module_names and root not in _NOT_INSTALLABLE
            and not root.startswith("_kb")}


def distribution_for(root: str) -> str:
    """The PyPI distribution that provides the import name `root` (best guess)."""
    return IMPORT_TO_DISTRIBUTION.get(root, root.replace("_", "-"))


def requirement_name(requirement: str) -> str:
    """The distribution name of a requirement string, normalised ('Foo_Bar>=1' -> 'foo-bar')."""
    for separator in ("@", "==", ">=", "<=", "~=", "!=", ">", "<", "[", ";", " "):
        requirement = requirement.split(separator)[0]
    return requirement.strip().lower().replace("_", "-").replace(".", "-")


def resolves(requirements: list[str]) -> tuple[bool, str]:
    """Whether `requirements` resolve together for this interpreter (no install: `uv pip
    compile`), and the resolver's last lines when they do not. Without uv, assumes yes."""
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if not Path(uv).is_file():
        return True, ""
    version = ".".join(map(str, sys.version_info[:2]))
    done = subprocess.run([uv, "pip", "compile", "-", "--quiet", "--python-version", version,
                           "--index-strategy", "unsafe-best-match"],
                          input="\n".join(requirements) + "\n", capture_output=True, text=True, timeout=600)
    if done.returncode == 0:
        return True, ""
    return False, "\n".join((done.stderr or done.stdout).strip().splitlines()[-4:])


def installable_subset(requirements: list[str]) -> tuple[list[str], dict[str, str]]:
    """The requirements that resolve together, taken greedily in the given order, and why
    each other one was left out (it does not exist, or conflicts with those before it)."""
    if resolves(requirements)[0]:
        return list(requirements), {}
    kept: list[str] = []
    refused: dict[str, str] = {}
    for requirement in requirements:
        ok, why = resolves([*kept, requirement])
        if ok:
            kept.append(requirement)
        else:
            refused[requirement] = why
    return kept, refused
