"""The library's warnings reach Python's `warnings` (raggemm/diagnostics.h):
the module installs a sink that forwards them, nothing prints to stderr."""

import warnings

import pytest

import raggemm


def test_unreadable_tune_cache_is_a_python_warning(tmp_path, capfd):
    cache = tmp_path / "tune_cache.json"
    cache.write_text("this is not json")
    with pytest.warns(UserWarning, match=r"tune_cache: .*tune_cache\.json"):
        raggemm.plan(64, 32, 48, 4, cache=cache)
    assert capfd.readouterr().err == ""


def test_warning_filters_decide(tmp_path):
    cache = tmp_path / "other_cache.json"
    cache.write_text("[1, 2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = raggemm.plan(64, 32, 48, 4, cache=cache)
    assert plan is not None
