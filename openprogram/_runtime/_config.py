"""``SessionConfig``: how a session runs, stored with it.

A session keeps its configuration in its own row of the store (the session's metadata,
under ``CONFIG_KEY``): the policy (every setting, with its schema version), the budget, the
model's name, the redaction setting and the defaults of its ``llm()`` calls. It is written
when the session is created and on every explicit change (``Session.configure``,
``openprogram configure``), and read back by every reopening, the CLI and the notebooks.

So the stored configuration wins on reopen. ``OPENPROGRAM_*`` variables and litellm's model
map are read only when a configuration is made: at creation, or through an explicit change.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

from context import (
    MAX_TOKENS,
    ContextEngine,
    ContextStorage,
    Policy,
    PolicyError,
    StateFolder,
    UnknownModel,
    model_info,
)
from graph import ConversationGraph, Redactor, Store, StoreError, redactor_from
from openprogram._errors import ConfigWarning
from openprogram._runtime._models import Model

CONFIG_KEY = "openprogram.config"
CONFIG_SCHEMA = 1
DEFAULT_STEPS = 25
ADAPTERS = "integrations"
"""Where a framework adapter's mirror keeps its start (``integrations.NAMESPACE``): a
session that has it is counted as sent."""
"""``llm()`` calls an agent makes per task unless its configuration says otherwise."""


class SessionConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A session's stored configuration."""

    policy: dict[str, Any]
    """The policy as :meth:`Policy.stored` gives it (with its schema version)."""
    budget: Annotated[int, msgspec.Meta(gt=0, le=MAX_TOKENS)] | None = None
    """The prompt budget given explicitly (None: the policy's own)."""
    model: str | None = None
    """The model's name (for the record, and to reopen a model that was given by name)."""
    model_by_name: bool = False
    """The model was given as a name, so a reopening without ``model=`` may resolve it."""
    redact: bool = False
    redact_patterns: dict[str, str] | None = None
    """With ``redact``: every pattern of the redactor (None: the default patterns)."""
    max_steps: Annotated[int, msgspec.Meta(gt=0)] = DEFAULT_STEPS
    history_tools: bool = True
    schema: int = CONFIG_SCHEMA

    def make_policy(self) -> Policy:
        return Policy.restore(self.policy)

    def make_redactor(self) -> Redactor | None:
        if not self.redact:
            return None
        if self.redact_patterns is None:
            return Redactor()
        return Redactor(self.redact_patterns, defaults=False)

    @property
    def effective_budget(self) -> int:
        return self.budget if self.budget is not None else self.make_policy().budget

    def describe(self) -> dict[str, Any]:
        """The configuration as JSON values, for people and ``--json``."""
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]


def redaction(
    redact: bool | Redactor | Mapping[str, Any] | None,
) -> tuple[bool, dict[str, str] | None]:
    """How a ``redact=`` argument is stored: on or off, and a custom redactor's patterns
    (None for the default ones, so a later release's new default patterns apply too)."""
    chosen = redactor_from(redact)
    if chosen is None:
        return False, None
    if chosen.setting is True:
        return True, None
    return True, {kind: pattern.pattern for kind, pattern in chosen.patterns.items()}


def load_config(store: Store, session: str) -> SessionConfig | None:
    """The session's stored configuration (None: a session made before it was stored, or
    by an importer). A setting that cannot be read (written by hand, or by an older version
    that did not check it) is named in a :class:`ConfigWarning` and falls back to its
    default, so the session's history stays readable; only an explicit change rewrites it."""
    try:
        meta = store.session_meta(session)
    except StoreError:
        return None
    found = meta.get(CONFIG_KEY)
    if found is None:
        return None
    values: dict[str, Any] = found if isinstance(found, dict) else {}
    schema = values.get("schema", CONFIG_SCHEMA)
    if isinstance(schema, int) and not isinstance(schema, bool) and schema > CONFIG_SCHEMA:
        raise PolicyError(
            f"session {session!r} was configured by a newer version (configuration schema "
            f"{schema}; this one reads {CONFIG_SCHEMA})"
        )
    bad = problems(values)
    if not isinstance(found, dict):
        _warn(session, f"is not a configuration (got {_shown(found)})", "the defaults")
        bad = {}  # said once: everything is a default
    for name, why in bad.items():
        fallback = "the preset for its model" if name == "policy" else _default(name)
        _warn(session, f"{name} {why} (got {_shown(values.get(name))})", fallback)
    kept = {name: value for name, value in values.items() if name not in bad}
    if "policy" not in kept:
        model = kept.get("model")
        kept["policy"] = policy_for(model if isinstance(model, str) else None).stored()
    return msgspec.convert(kept, SessionConfig)


def problems(values: Mapping[str, Any]) -> dict[str, str]:
    """What is wrong with each setting of a configuration as stored (JSON values) that a
    session could not run with: the one check for what is written and what is read."""
    found: dict[str, str] = {}
    for field in msgspec.structs.fields(SessionConfig):
        if field.name not in values:
            if field.required:
                found[field.name] = "is missing"
            continue
        value = values[field.name]
        try:
            msgspec.convert(value, field.type)  # strict: "8000" is no budget, nor is True
        except msgspec.ValidationError:
            found[field.name] = WANTED[field.name]
            continue
        why = _meaning(field.name, value)
        if why:
            found[field.name] = why
    return found


WANTED = {
    "policy": "must be a stored policy (an object with its schema and values)",
    "budget": "must be a whole number of tokens from 1 to 10**15, or null",
    "model": "must be a model name or null",
    "model_by_name": "must be true or false",
    "redact": "must be true or false",
    "redact_patterns": "must map kinds to regular expressions, or be null",
    "max_steps": "must be a whole number above 0",
    "history_tools": "must be true or false",
    "schema": "must be a whole number",
}
"""What each stored setting must be, for the one-line error or warning that names it."""


def _meaning(name: str, value: Any) -> str | None:
    """What is wrong with a well-typed setting a session still could not use."""
    try:
        if name == "policy":
            Policy.restore(value)
        elif name == "redact_patterns" and value is not None:
            Redactor(value, defaults=False)
    except PolicyError as error:
        return f"cannot be read: {error}"
    except (re.error, ValueError, TypeError, RecursionError) as error:
        return f"has a pattern that does not compile: {error}"
    return None


def _default(name: str) -> str:
    if name == "budget":
        return "the policy's own budget"
    field = next(f for f in msgspec.structs.fields(SessionConfig) if f.name == name)
    return f"its default ({field.default!r})"


def _warn(session: str, problem: str, fallback: str) -> None:
    warnings.warn(
        f"session {session!r}: the stored configuration's {problem}; running with "
        f"{fallback} instead (`openprogram configure {session}` stores a good one)",
        ConfigWarning,
        stacklevel=2,  # one place: a long-running session warns once, not at every call
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}…({len(text):,} characters)"


def stored_engine(
    graph: ConversationGraph,
    *,
    policy: Policy | None = None,
    budget: int | None = None,
    state_dir: StateFolder | str | os.PathLike[str] | None = None,
    state_key: str | None = None,
) -> ContextEngine:
    """An engine configured as the session stored it (its policy, and its budget unless
    ``budget`` is given; ``policy`` replaces the stored one), with the tools of the last
    prompt it sent, counting as sent where a framework adapter wrote the session: what a
    reader renders to see what the agent sends. On a read-only
    store it decides and never writes."""
    config = load_config(graph.store, graph.session)
    if policy is None and config is not None:
        policy = config.make_policy()
    if budget is None and config is not None:
        budget = config.budget
    engine = ContextEngine(
        graph,
        policy,
        budget=budget,
        state_dir=state_dir,
        state_key=state_key,
        read_only=bool(getattr(graph.store, "read_only", False)),
    )
    if engine.storage is not None:
        engine.set_tools(engine.storage.last_tools())
    if graph.store.get_values(graph.session, ADAPTERS):
        engine.count_as_sent()  # a framework adapter's session: counted as it counts
    return engine


def save_config(store: Store, session: str, config: SessionConfig) -> None:
    store.update_session_meta(session, {CONFIG_KEY: storable(config, session)})


def storable(config: SessionConfig, session: str) -> dict[str, Any]:
    """The configuration as the store keeps it (JSON), once it is known to read back as
    it is; a :class:`PolicyError` naming the setting otherwise, before anything is written
    (a refused change used to be stored, and the session then no longer opened)."""
    values: dict[str, Any] = msgspec.to_builtins(config)
    for name, why in problems(values).items():
        _refuse(session, name, why, values.get(name))
    for name, value in values.items():
        where = _unstorable(value, name)
        if where is not None:
            _refuse(session, where[0].replace("policy.values.", "policy."), JSON, where[1])
    return values


JSON = "cannot be stored as JSON (NaN, infinity and lone surrogates have no JSON form)"


def _unstorable(value: Any, path: str) -> tuple[str, Any] | None:
    """The first item under ``value`` that would not read back from JSON as it is."""
    if isinstance(value, dict):
        items: list[tuple[Any, Any]] = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        try:
            kept = msgspec.json.decode(msgspec.json.encode(value))
        except (UnicodeEncodeError, msgspec.EncodeError):
            return path, value
        return None if kept == value else (path, value)
    for key, item in items:
        if isinstance(key, str) and _unstorable(key, path) is not None:
            return path, key
        found = _unstorable(item, f"{path}.{key}")
        if found is not None:
            return found
    return None


def _refuse(session: str, name: str, why: str, value: Any) -> None:
    raise PolicyError(
        f"session {session!r}: {name} {why} (got {_shown(value)}); nothing was stored"
    )


def changes(before: SessionConfig | None, after: SessionConfig) -> dict[str, Any]:
    """What differs between two configurations (a policy by its changed settings)."""
    if before is None:
        return {"created": True}
    old, new = msgspec.to_builtins(before), msgspec.to_builtins(after)
    found: dict[str, Any] = {}
    for key in new:
        if key == "policy":
            was, now = old["policy"].get("values", {}), new["policy"].get("values", {})
            diff = {k: v for k, v in now.items() if was.get(k) != v}
            if diff:
                found["policy"] = diff
        elif old.get(key) != new[key]:
            found[key] = new[key]
    return found


def with_fields(policy: Policy, fields: Mapping[str, Any]) -> Policy:
    """``policy`` with some settings changed (validated like any policy)."""
    unknown = [name for name in fields if name not in Policy.model_fields]
    if unknown:
        raise PolicyError(f"unknown policy setting(s) {unknown}")
    values = {**policy.model_dump(), **fields}
    if "model" in fields:  # a new model's window and output limit come from the model map
        for derived in ("context_window", "max_output_tokens"):
            if derived not in fields:
                values.pop(derived)
    return Policy(**values)


RENDERING = frozenset({"policy", "budget"})
"""Changes that change what a render shows: they start a new epoch of tier state."""


def record_change(
    store: Store,
    session: str,
    folder: StateFolder,
    before: SessionConfig | None,
    after: SessionConfig,
) -> dict[str, Any]:
    """Store ``after`` and record what changed as a configuration event (a new epoch of
    tier state when the policy or the budget changed); returns the changes."""
    found = changes(before, after)
    if before is not None and not found:
        return {}
    # Opened (and its side tables migrated) before the transaction: a migration inside it
    # would wait on the transaction's own lock.
    storage = ContextStorage(store, session, folder) if before is not None else None
    with store.transaction():  # the configuration and its event, or neither
        save_config(store, session, after)  # refuses one it could not read back
        if storage is not None:
            storage.configure(found, new_epoch=bool(RENDERING & set(found)))
    return found


def parse_setting(text: str) -> tuple[str, Any]:
    """``FIELD=VALUE`` from the command line (VALUE as JSON when it is JSON)."""
    import json

    name, sep, value = text.partition("=")
    if not sep or not name:
        raise PolicyError(f"--set wants FIELD=VALUE, not {text!r}")
    try:
        return name.strip(), json.loads(value)
    except json.JSONDecodeError:
        return name.strip(), value


def policy_for(model: Model | str | None) -> Policy:
    """The claude-code preset for a model the map knows, by name or by a model object's
    ``name`` (the 128k default otherwise)."""
    name = model_name(model)
    if name:
        try:
            model_info(name)
        except UnknownModel:
            name = None
    try:
        return Policy.claude_code(name)
    except PolicyError:
        return Policy.claude_code(None)


def model_name(model: Model | str | None) -> str | None:
    return model if isinstance(model, str) else getattr(model, "name", None)


def known_model(model: str) -> bool:
    """Whether litellm's model map knows ``model`` (its window can be read)."""
    try:
        model_info(model)
    except UnknownModel:
        return False
    return True


def session_config(
    stored: SessionConfig | None,
    model: Model | str | None,
    policy: Policy | None,
    budget: int | None,
    redact: bool | Redactor | Mapping[str, Any] | None,
    max_steps: int | None,
    history_tools: bool | None,
    *,
    explicit: bool = False,
) -> SessionConfig:
    """The configuration to run with: the stored one, with what was given explicitly."""
    if stored is None:
        on, patterns = redaction(redact)
        chosen = policy or policy_for(model)
        return SessionConfig(
            policy=chosen.stored(),
            budget=budget,
            model=model_name(model),
            model_by_name=isinstance(model, str),
            redact=on,
            redact_patterns=patterns,
            max_steps=max_steps or DEFAULT_STEPS,
            history_tools=True if history_tools is None else history_tools,
        )
    values: dict[str, Any] = {}
    if policy is not None:
        values["policy"] = policy.stored()
    if budget is not None:
        values["budget"] = budget
    name = model_name(model)
    if model is not None and (explicit or name != stored.model):
        values["model"], values["model_by_name"] = name, isinstance(model, str)
    if redact is not None:
        values["redact"], values["redact_patterns"] = redaction(redact)
    if max_steps is not None:
        values["max_steps"] = max_steps
    if history_tools is not None:
        values["history_tools"] = history_tools
    return msgspec.structs.replace(stored, **values)
