"""Every ```python block of docs/python.md runs as written, each in a fresh
interpreter (so a block that leans on names from another one fails)."""

import pathlib
import re
import subprocess
import sys

import pytest

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


def test_the_doc_has_python_blocks():
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_block_runs_as_written(index, tmp_path):
    block = BLOCKS[index]
    for module in ("torch", "jax"):
        if re.search(rf"^import .*\b{module}\b", block, flags=re.M):
            pytest.importorskip(module)
    result = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True,
                            timeout=300, cwd=tmp_path)
    assert result.returncode == 0, f"block {index}:\n{block}\n{result.stderr}"
