"""The installed package travels: its extension finds Highway and OpenMP in
the wheel's own raggemm.libs/ (auditwheel repair, scripts/build_wheel.sh),
not in the system's -dev packages, and it ships its type information.

scripts/test.sh installs the repaired wheel; an editable or unrepaired
install has no raggemm.libs/ and these tests skip."""

import pathlib
import shutil
import subprocess
import sys

import pytest

import raggemm
from raggemm import _raggemm

PACKAGE = pathlib.Path(raggemm.__file__).parent
LIBS = PACKAGE.parent / "raggemm.libs"
BUNDLED = ("libhwy", "libgomp")

needs_repaired_wheel = pytest.mark.skipif(not LIBS.is_dir(),
                                          reason="not installed from a repaired wheel")


@needs_repaired_wheel
def test_highway_and_openmp_resolve_from_the_wheel():
    bundled = sorted(p.name for p in LIBS.iterdir())
    for name in BUNDLED:
        assert any(b.startswith(name) for b in bundled), bundled
    ldd = subprocess.run(["ldd", _raggemm.__file__], capture_output=True, text=True, check=True)
    for name in BUNDLED:
        line = next(x for x in ldd.stdout.splitlines() if name in x)
        assert "raggemm.libs" in line, line


@needs_repaired_wheel
def test_the_wheel_imports_with_the_system_libraries_hidden():
    # A private mount namespace in which the system's libhwy and libgomp are
    # empty files: an unrepaired build fails to load there ("file too short").
    unshare = shutil.which("unshare")
    hidden = [pathlib.Path(p).resolve() for p in ("/lib/x86_64-linux-gnu/libhwy.so.1",
                                                  "/lib/x86_64-linux-gnu/libgomp.so.1")]
    hidden = [p for p in hidden if p.exists()]
    if unshare is None or not hidden:
        pytest.skip("needs unshare and the system libraries to hide")
    mounts = " && ".join(f"mount --bind /dev/null {p}" for p in hidden)
    code = ("import numpy as np, raggemm; print(raggemm.gmm(np.ones((3, 2), np.float32), "
            "np.ones((1, 2, 4), np.float32), np.array([2], np.int32)).sum())")
    result = subprocess.run([unshare, "-m", "sh", "-c", f"{mounts} && {sys.executable} -c '{code}'"],
                            capture_output=True, text=True, timeout=120)
    if "mount" in result.stderr and result.returncode != 0 and "raggemm" not in result.stderr:
        pytest.skip(f"no private mount namespace here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "16.0"


def test_the_package_ships_its_type_information():
    assert (PACKAGE / "py.typed").is_file()
    assert (PACKAGE / "_raggemm.pyi").is_file()


def test_the_stubs_cover_every_function_of_the_extension():
    import ast

    stubbed = {node.name for node in ast.parse((PACKAGE / "_raggemm.pyi").read_text()).body
               if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    exported = {name for name in dir(_raggemm) if not name.startswith("_")}
    assert exported <= stubbed, exported - stubbed


def test_every_public_function_has_a_docstring():
    import importlib

    for module_name in ("raggemm", "raggemm.torch", "raggemm.jax"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name in module.__all__:
            assert (getattr(module, name).__doc__ or "").strip(), f"{module_name}.{name}"
