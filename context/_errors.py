"""Errors raised by the ``context`` package.

Rendering is fail-open: a tier that fails is recorded, not raised. These errors are for
misuse that no render can recover from (a bad policy, a budget that cannot hold the
system prompt when the caller asked for strictness, an unknown model).

::

    ContextError
    ├── PolicyError          a Policy or preset that cannot be used (names the field)
    ├── UnknownModel         a model missing from the bundled model map
    ├── TokenizerError       no encoding could be loaded for a model
    ├── OffloadError         an offload path that would escape its folder, or a failed write
    ├── StateDirError        a symlink or non-folder inside the state folder where we write
    │   └── ForeignStateFolder   a state folder whose marker names another database
    │       └── CopiedDatabase   …or another file with this database's UUID (a copy)
    ├── RecordError          a records file or table that cannot be read or written
    │   └── PartialAppend    an append that stopped partway (says how many lines made it)
    ├── UnknownLayer         a layer (or node) id that is not in this session
    ├── AlreadyRolledBack    a layer rolled back already (here or by another process)
    ├── CommitConflict       decisions another writer's layers refuse, even decided again
    ├── SummaryError         a summarizer reply that cannot be used (tiers fall back)
    └── ContextOverflowError the provider keeps refusing the prompt; recovery gave up

    BudgetFloorWarning       (a warning, once per engine) the tool schemas and system
                             prompt alone are over the budget: every prompt goes out over it
"""

from __future__ import annotations


class ContextError(Exception):
    """Base class of every error the context package raises."""


class PolicyError(ContextError, ValueError):
    """A Policy or preset that cannot be used."""


class UnknownModel(ContextError, KeyError):
    """A model that is not in the bundled model map."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown model"


class TokenizerError(ContextError):
    """No encoding could be loaded for a model."""


class OffloadError(ContextError):
    """An offload path that would escape its folder, or a write that failed."""


class RecordError(ContextError):
    """A records file or table that cannot be read or written."""


class PartialAppend(RecordError):
    """An append to a log that stopped partway: ``written`` whole lines made it, the rest
    did not (so a caller keeps exactly those pending)."""

    def __init__(self, message: str, written: int) -> None:
        super().__init__(message)
        self.written = written


class StateDirError(OffloadError):
    """A symlink or non-folder inside the state folder, where a write would escape it."""


class ForeignStateFolder(StateDirError):
    """A state folder whose marker names another database: never shared silently."""


class CopiedDatabase(ForeignStateFolder):
    """A SQLite file opening a state folder whose marker names another file that still
    holds the same database UUID: a copy (``cp agent.db experiment.db``) is another
    database, refused its original's folder until it is adopted on purpose."""


class UnknownLayer(ContextError, KeyError):
    """A layer or node id that is not in this session (or belongs to another one)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown layer"


class AlreadyRolledBack(ContextError):
    """Rolling back a layer that is rolled back already, by this process or another: the
    second rollback is refused, so a session never holds two for one layer."""


class CommitConflict(ContextError):
    """A render's (or a manual operation's) new layer overlaps, in part, a layer another
    writer stored first on the same branch; deciding again from what it stored did not
    help either."""


class SummaryError(ContextError):
    """A summarizer's reply that cannot be used (the tier records it and falls back)."""


class ContextOverflowError(ContextError):
    """The provider refused the prompt as too long, again and again; ``recover`` gave up."""


class BudgetFloorWarning(UserWarning):
    """The tool schemas and the system prompt alone do not fit the budget, so no render
    can: prompts go out over it (warned once per engine; ``Rendered.floor`` and the render
    receipt's ``floor_tokens`` say by how much)."""
