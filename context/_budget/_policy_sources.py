"""Where a ``Policy``'s values come from besides the code that makes it: ``OPENPROGRAM_*``
environment variables and litellm's model map when a policy is made, and a stored policy
when a session is reopened, which neither of the others may change (apart from the
settings and their checks, so the settings module holds settings)."""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic.fields import FieldInfo

from .._errors import PolicyError, UnknownModel
from ._models import model_info
from ._policy_text import from_env

ENV_PREFIX = "OPENPROGRAM_"

POLICY_SCHEMA = 1
"""The version of a stored policy's shape (:meth:`Policy.stored`)."""

NOT_FROM_ENV = frozenset({"compactable_tools", "triggers", "cascade", "always", "redact_patterns"})
"""Settings too structured for an environment variable: set in code or configured only."""

_RESTORING: contextvars.ContextVar[bool] = contextvars.ContextVar("restoring", default=False)


def filled(fields: Mapping[str, FieldInfo], data: dict[str, Any]) -> dict[str, Any]:
    """The values given in code, completed from the environment and, for a ``model``
    without a window or output limit, from the model map (nothing while restoring)."""
    values = dict(data)
    if _RESTORING.get():
        return values
    for name, info in fields.items():
        variable = ENV_PREFIX + name.upper()
        if name in values or name in NOT_FROM_ENV or variable not in os.environ:
            continue
        values[name] = from_env(variable, os.environ[variable], info.annotation)
    model = values.get("model")
    if model and ("context_window" not in values or "max_output_tokens" not in values):
        try:
            found = model_info(str(model))
        except UnknownModel as error:
            raise PolicyError(f"model: {error}") from error
        window = found.max_input_tokens or 128_000
        values.setdefault("context_window", window)
        values.setdefault(
            "max_output_tokens", min(found.max_output_tokens or 16_384, 32_000, window // 4)
        )
    return values


def stored_values(stored: dict[str, Any], fields: Mapping[str, FieldInfo]) -> dict[str, Any]:
    """A stored policy's values this version knows, once its schema is one it reads."""
    schema = stored.get("schema")
    values = stored.get("values")
    if not isinstance(schema, int) or schema > POLICY_SCHEMA or not isinstance(values, dict):
        raise PolicyError(
            f"a stored policy of schema {schema!r} cannot be read by this version "
            f"(it reads up to {POLICY_SCHEMA})"
        )
    return {k: v for k, v in values.items() if k in fields}


@contextlib.contextmanager
def restoring() -> Iterator[None]:
    """While a stored policy is rebuilt: :func:`filled` adds nothing to its values."""
    token = _RESTORING.set(True)
    try:
        yield
    finally:
        _RESTORING.reset(token)
