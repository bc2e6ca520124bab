"""Which third-party distributions a piece of code imports.

Import names and PyPI names often differ (`yaml` is PyYAML, `Crypto` is pycryptodome); the
table below covers the common ones, and any other name is assumed to be its own
distribution. The standard library never needs installing.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

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
}
_NOT_INSTALLABLE = frozenset({"__main__", "conftest", "solution", "knowbench_test"})


def import_roots(code: str, required_only: bool = False) -> set[str]:
    """Top-level module names imported (absolutely) anywhere in `code`.

    With `required_only`, imports guarded by `try: ... except ImportError` (optional
    dependencies, such as `gmpy` in ecdsa's tests) are left out."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    optional: set[int] = set()
    if required_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
                optional |= {id(inner) for statement in node.body for inner in ast.walk(statement)}
    roots: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("importorskip", "import_module") and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            roots.add(node.args[0].value.split(".")[0])  # pytest.importorskip("dateparser")
    return roots


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
