"""Fast defaults: a numpy / torch / JAX call that leaves tiles, kernel and
buffers unset resolves them as the CLI does (explicit > tune cache >
heuristic), and raggemm.tune writes the cache those calls read."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import raggemm

M, EMBED, MLP, GROUPS = 64, 32, 48, 4
SIZES = np.array([30, 0, 20, 14], np.int32)


def run_python(code, cache):
    env = {**os.environ, "RAGGEMM_TUNE_CACHE": str(cache)}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                            text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


RESOLVE = """
    import json, numpy as np, raggemm
    lhs = np.ones(({m}, {embed}), np.float32)
    rhs = np.ones(({groups}, {embed}, {mlp}), np.float32)
    sizes = np.array({sizes}, np.int32)
    auto = raggemm.resolve_call(lhs, rhs, sizes)
    explicit = raggemm.resolve_call(lhs, rhs, sizes, kernel="v1", tiles=(8, 0, 16))
    print(json.dumps(dict(auto=[auto.tiles, auto.kernel, auto.buffers, dict(auto.source)],
                          explicit=[explicit.tiles, explicit.kernel, dict(explicit.source)])))
""".format(m=M, embed=EMBED, mlp=MLP, groups=GROUPS, sizes=SIZES.tolist())


def test_an_unset_call_takes_the_tune_cache_entry_and_explicit_settings_win(tmp_path):
    cache = tmp_path / "tune_cache.json"
    before = run_python(RESOLVE, cache)
    assert set(before["auto"][3].values()) == {"heuristic"}, before

    rows = raggemm.tune(M, EMBED, MLP, GROUPS, group_sizes=SIZES, budget_s=2.0, cache=cache,
                        threads=1)
    assert [(r["weight"], r["pass"]) for r in rows] == [
        (w, p) for w in ("wi", "wo") for p in ("fwd", "dlhs", "drhs")]
    assert all(r["cache"] == str(cache) for r in rows)
    assert json.loads(cache.read_text())  # the cache file exists and is JSON
    winner = rows[0]  # wi fwd: the problem lhs [M, EMBED] x rhs [G, EMBED, MLP]

    after = run_python(RESOLVE, cache)
    tiles, kernel, buffers, source = after["auto"]
    assert set(source.values()) == {"cache"}, after
    assert (tuple(tiles), kernel, buffers) == (tuple(winner["tiles"]), winner["kernel"],
                                               winner["buffers"])
    tiles, kernel, source = after["explicit"]
    assert kernel == "v1" and tiles[0] == 8 and tiles[2] == 16
    assert source["kernel"] == source["m"] == source["n"] == "explicit"
    assert source["k"] == "cache"


def test_default_calls_agree_with_every_explicit_kernel():
    rng = np.random.default_rng(0)
    lhs = rng.standard_normal((M, EMBED)).astype(np.float32)
    rhs = rng.standard_normal((GROUPS, EMBED, MLP)).astype(np.float32)
    dout = rng.standard_normal((M, MLP)).astype(np.float32)
    for kernel in ("v1", "v2"):
        np.testing.assert_allclose(raggemm.gmm(lhs, rhs, SIZES),
                                   raggemm.gmm(lhs, rhs, SIZES, kernel=kernel), rtol=1e-5,
                                   atol=1e-5)
        np.testing.assert_allclose(raggemm.tgmm(lhs, dout, SIZES),
                                   raggemm.tgmm(lhs, dout, SIZES, kernel=kernel), rtol=1e-5,
                                   atol=1e-4)


def test_resolve_call_refuses_bad_settings_naming_them():
    lhs, rhs = np.ones((4, 3), np.float32), np.ones((2, 3, 5), np.float32)
    sizes = np.array([2, 2], np.int32)
    with pytest.raises(raggemm.Error, match="kernel"):
        raggemm.resolve_call(lhs, rhs, sizes, kernel="v3")
    with pytest.raises(raggemm.Error, match="pass_"):
        raggemm.resolve_call(lhs, rhs, sizes, pass_="bwd")
    with pytest.raises(raggemm.Error, match="budget_s"):
        raggemm.tune(4, 3, 5, 2, budget_s=-1)
