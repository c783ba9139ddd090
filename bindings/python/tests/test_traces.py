"""The rule for the shared traces (conftest.require_traces): with CI set, a missing
../shared/traces fails a trace-based test; without CI it skips, naming the path."""

from __future__ import annotations

import pytest

from conftest import TRACES, in_ci, need_traces, require_traces


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_missing_traces_fail_when_ci_is_set(tmp_path, ci):
    missing = tmp_path / "shared" / "traces"
    assert in_ci({"CI": ci})
    with pytest.raises(pytest.fail.Exception) as ei:
        require_traces(missing, {"CI": ci})
    assert str(missing) in str(ei.value) and "CI is set" in str(ei.value)


@pytest.mark.parametrize("env", [{}, {"CI": ""}, {"CI": "0"}, {"CI": "false"}])
def test_missing_traces_skip_loudly_otherwise(tmp_path, env):
    missing = tmp_path / "shared" / "traces"
    assert not in_ci(env)
    with pytest.raises(pytest.skip.Exception) as ei:
        require_traces(missing, env)
    assert str(missing) in str(ei.value) and str(ei.value).startswith("SKIPPED, NOT TESTED")


def test_present_traces_are_listed(tmp_path):
    with pytest.raises(AssertionError, match="holds no"):
        require_traces(tmp_path, {"CI": "true"})
    for name in ("b.json", "a.json", "notes.txt"):
        (tmp_path / name).write_text("{}")
    assert require_traces(tmp_path, {"CI": "true"}) == [tmp_path / "a.json", tmp_path / "b.json"]


def test_the_process_environment_decides(monkeypatch, tmp_path):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception):
        require_traces(tmp_path / "missing")
    if TRACES.is_dir():
        assert need_traces()  # the real folder, when it is there
