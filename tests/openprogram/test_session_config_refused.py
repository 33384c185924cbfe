"""A configuration change that is refused stores nothing (issue 31, item 2), and a stored
configuration that cannot be read (written by hand, or by an older version) is named in a
warning and run with its defaults: the session's history stays readable."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from context import ContextStorage, PolicyError
from graph import open_store
from openprogram import ConfigWarning, Session
from openprogram.cli import main
from openprogram.testing import TestModel

ROOT = Path(__file__).resolve().parents[2]
KEY = "openprogram.config"


def made(tmp_path: Path) -> str:
    db = str(tmp_path / "a.db")
    with Session(db, "s", model=TestModel(["Paris."])) as session:
        session.llm("Capital of France?")
    return db


def stored(db: str) -> tuple[Any, list[dict[str, Any]]]:
    """The stored configuration and the recorded configuration events."""
    store = open_store(db)
    try:
        meta = store.session_meta("s").get(KEY)
        return meta, [e["changes"] for e in ContextStorage(store, "s").configurations()]
    finally:
        store.close()


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from openprogram.cli import run; run()", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        check=False,
    )


@pytest.mark.parametrize("budget", [0, -1, 1.5, "8000", math.nan, True, 10**16])
def test_a_refused_budget_stores_nothing_and_the_session_still_opens(
    tmp_path: Path, budget: Any
) -> None:
    db = made(tmp_path)
    before = stored(db)
    session = Session(db, "s", model=TestModel(["x"]))
    with pytest.raises(PolicyError, match=r"session 's': budget .*nothing was stored"):
        session.configure(budget=budget)
    assert session.config.budget is None  # the running session is unchanged too
    assert stored(db) == before
    assert Session(db, "s").config == session.config  # reopens, and no warning (errors here)
    assert cli("--db", db, "context", "s").returncode == 0


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"max_steps": 0}, "max_steps"),
        ({"max_steps": "3"}, "max_steps"),
        ({"history_tools": "yes"}, "history_tools"),
        ({"cache_write_price": math.inf}, "policy.cache_write_price"),  # JSON would say null
        ({"name": "\ud800"}, "policy.name"),  # no JSON form at all
    ],
)
def test_any_refused_setting_stores_nothing(
    tmp_path: Path, change: dict[str, Any], named: str
) -> None:
    db = made(tmp_path)
    before = stored(db)
    with pytest.raises(PolicyError, match=rf"session 's': {named} .*nothing was stored"):
        Session(db, "s", model=TestModel(["x"])).configure(**change)
    assert stored(db) == before
    Session(db, "s")


def test_a_refused_configuration_at_creation_stores_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    with pytest.raises(PolicyError, match="budget"):
        Session(db, "new", model=TestModel(["x"]), budget=0)
    store = open_store(db)
    assert store.session_meta("new").get(KEY) is None
    store.close()
    assert Session(db, "new", model=TestModel(["x"])).config.budget is None


def test_the_command_line_refuses_before_it_stores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = made(tmp_path)
    before = stored(db)
    assert main(["--db", db, "configure", "s", "--set", "cache_write_price=Infinity"]) == 1
    err = capsys.readouterr().err
    assert "policy.cache_write_price cannot be stored as JSON" in err
    assert "nothing was stored" in err
    assert stored(db) == before
    assert main(["--db", db, "context", "s"]) == 0


BAD = [
    ("budget", "8000", "budget must be a whole number"),
    ("budget", 0, "budget must be a whole number"),
    ("max_steps", -2, "max_steps must be a whole number above 0"),
    ("history_tools", "no", "history_tools must be true or false"),
    ("redact_patterns", {"key": "("}, "redact_patterns has a pattern that does not compile"),
    ("policy", {"schema": 1, "values": {"low_water": 7}}, "policy cannot be read"),
    ("policy", "claude-code", "policy must be a stored policy"),
]


def spoil(db: str, field: str, value: Any) -> None:
    """What an older version (that did not check) or a hand edit left stored."""
    store = open_store(db)
    config = dict(store.session_meta("s")[KEY])
    config[field] = value
    store.update_session_meta("s", {KEY: config})
    store.close()


@pytest.mark.parametrize(("field", "value", "said"), BAD)
def test_a_bad_stored_setting_is_named_and_the_session_reopens(
    tmp_path: Path, field: str, value: Any, said: str
) -> None:
    db = made(tmp_path)
    spoil(db, field, value)
    with pytest.warns(ConfigWarning, match=rf"session 's': the stored configuration's {said}"):
        session = Session(db, "s", model=TestModel(["Berlin."]))
    with pytest.warns(ConfigWarning):  # it runs, with the default in place of the bad one
        assert session.llm("Capital of Germany?") == "Berlin."
    assert stored(db)[0][field] == value  # reading rewrote nothing; a change would
    session.configure(max_steps=9)  # an explicit change stores the whole configuration
    assert Session(db, "s").config.max_steps == 9  # repaired: no warning any more


def test_the_command_line_reads_a_bad_configuration_with_a_warning(tmp_path: Path) -> None:
    db = made(tmp_path)
    spoil(db, "budget", "8000")
    export = tmp_path / "out.json"
    for argv in (["context", "s"], ["show", "s"], ["export", "s", str(export)], ["configure", "s"]):
        done = cli("--db", db, *argv)
        assert done.returncode == 0, (argv, done.stderr)
        if argv[0] in ("context", "configure"):  # the commands that read it
            assert done.stderr.splitlines()[0].startswith(
                "warning: session 's': the stored configuration's budget must be a whole "
                "number of tokens from 1 to 10**15, or null (got '8000')"
            ), done.stderr
    assert export.exists()


def test_a_configuration_that_is_not_one_falls_back_to_the_defaults(tmp_path: Path) -> None:
    db = made(tmp_path)
    store = open_store(db)
    store.update_session_meta("s", {KEY: "budget=8000"})
    store.close()
    with pytest.warns(ConfigWarning, match="is not a configuration"):
        session = Session(db, "s", model=TestModel(["x"]))
    assert session.config.budget is None
    assert session.policy.name == "claude-code"
