"""Shared pytest fixtures for the tests that drive the raggemm CLI binary.

The binary is $RAGGEMM_CLI (scripts/test.sh sets it to the Release build);
without it, build/release/raggemm. A missing binary fails the CLI tests with
a message saying which path was tried, rather than skipping them silently.
"""

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def raggemm_cli():
    path = pathlib.Path(os.environ.get("RAGGEMM_CLI", ROOT / "build" / "release" / "raggemm"))
    if not path.is_file():
        pytest.fail(f"raggemm CLI not found at {path}: build it or set RAGGEMM_CLI")
    return path


@pytest.fixture
def run_cli(raggemm_cli):
    """Runs `raggemm ARGS...`; asserts exit status 0 unless expect_ok=False."""

    def run(*args, expect_ok=True):
        result = subprocess.run([str(raggemm_cli), *map(str, args)], capture_output=True,
                                text=True, timeout=300)
        if expect_ok:
            assert result.returncode == 0, f"raggemm {' '.join(map(str, args))}: {result.stderr}"
        return result

    return run
