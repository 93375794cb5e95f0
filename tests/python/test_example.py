"""examples/jax_moe.py runs two training steps with both implementations and
their losses agree."""

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("jax")

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "jax_moe.py")


def test_example_trains_two_steps_with_both_implementations():
    result = subprocess.run(
        [sys.executable, EXAMPLE, "--steps", "2", "--tokens", "64", "--embed", "32", "--mlp",
         "48", "--experts", "4"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    losses = {}
    for name, step, loss in re.findall(r"(raggemm|lax) step (\d+): loss ([0-9.e+-]+)", result.stdout):
        losses.setdefault(name, []).append(float(loss))
    assert len(losses.get("raggemm", [])) == 2 and len(losses.get("lax", [])) == 2, result.stdout
    for ours, theirs in zip(losses["raggemm"], losses["lax"]):
        assert ours == pytest.approx(theirs, rel=1e-4)
    assert losses["raggemm"][1] < losses["raggemm"][0], "one SGD step lowers the loss"
    match = re.search(r"max relative loss difference raggemm vs lax: ([0-9.e+-]+)", result.stdout)
    assert match and float(match.group(1)) <= 1e-4
    assert "speedup" in result.stdout


def test_example_rejects_bad_flags():
    result = subprocess.run([sys.executable, EXAMPLE, "--steps", "0"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2 and "--steps" in result.stderr
