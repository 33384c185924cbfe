"""How ``Policy`` reads an environment value, reports a bad one in one line and fills in a
preset's model, and the field list its help text ends with (apart, so the settings module
holds settings)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from .._errors import PolicyError


def shown(value: Any) -> str:
    """A short repr for an error message (an int too long for decimal text has none)."""
    try:
        text = repr(value)
    except ValueError:
        return f"an int of {value.bit_length()} bits" if isinstance(value, int) else "?"
    return text if len(text) <= 60 else f"{text[:40]}…({len(text):,} characters)"


def policy_error(error: ValidationError) -> PolicyError:
    """The first problem pydantic found, as one line that names the setting and the value."""
    first = error.errors()[0]
    message = str(first["msg"]).removeprefix("Value error, ")
    where = ".".join(str(p) for p in first["loc"])
    if not where:
        return PolicyError(message)
    return PolicyError(f"{where}: {message} (got {shown(first.get('input'))})")


def from_env(variable: str, text: str, annotation: Any) -> Any:
    """An environment value as the field's type wants it (JSON for numbers and None)."""
    if annotation in (str, Path) or "Literal" in str(annotation):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        if "str" in str(annotation):
            return text
        raise PolicyError(f"{variable}={text!r} is not a valid value") from None


def fields_doc(model: type[BaseModel]) -> str:
    """Every field with its default and description, for ``help(Policy)``."""
    lines = ["", "Fields:", ""]
    for name, info in model.model_fields.items():
        default = "computed" if info.default_factory is not None else repr(info.default)
        text = " ".join((info.description or "").split())
        lines.append(f"    {name} (default {default}): {text}")
    return "\n".join(lines) + "\n"


def with_model(values: dict[str, Any], model: str | None) -> dict[str, Any]:
    """A preset's values with ``model`` only when given (else ``OPENPROGRAM_MODEL`` may)."""
    return values if model is None else {**values, "model": model}
