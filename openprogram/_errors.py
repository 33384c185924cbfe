"""Errors raised by the ``openprogram`` runtime, importers and CLI.

The LLM loop re-raises ``context.ContextOverflowError`` (a ``ContextError``) when the
engine gives up after repeated context-overflow errors; everything else is here::

    OpenProgramError
    ├── TraceFormatError     a trace file that cannot be imported (names file, line or JSON path)
    ├── UnknownFormat        a trace whose format cannot be detected or is not supported
    ├── BenchError           bench inputs that cannot be measured (a zero budget, a bad policy)
    ├── BaselineUnavailable  a baseline whose optional dependency is not installed
    ├── SessionError         a session that does not exist or cannot be used
    │   ├── NoSession        agentic code run outside any session
    │   └── LeaseLost        another process took the lease of a function this one runs
    ├── ModelError           no model configured, or the provider failed (not an overflow)
    ├── StepLimitExceeded    an LLM call used up its steps without a final answer
    ├── OutputValidationError  a structured answer still invalid after one repair turn
    ├── ToolDefinitionError  a Python callable that cannot be a tool (names the parameter)
    └── UsageError           a command line (or a viewer's, a proxy's options) that makes no sense

Warnings (``UserWarning`` subclasses, so ``filterwarnings`` can select them)::

    ConfigWarning            a stored session configuration with a setting that cannot be
                             read: named, and run with its default instead
"""

from __future__ import annotations


class OpenProgramError(Exception):
    """Base class of every error the openprogram package raises."""


class TraceFormatError(OpenProgramError, ValueError):
    """A trace that cannot be imported; says which file, where in it, and what was expected."""

    def __init__(self, path: str, where: str, problem: str) -> None:
        self.path = path
        self.where = where
        self.problem = problem
        super().__init__(f"{path}:{where}: {problem}")


class UnknownFormat(OpenProgramError, ValueError):
    """A trace whose format cannot be detected, or a format name we do not know."""


class BenchError(OpenProgramError, ValueError):
    """Inputs the bench cannot measure (a budget of zero, a negative keep count)."""


class BaselineUnavailable(OpenProgramError, ImportError):
    """A baseline whose optional dependency is not installed."""


class MissingExtra(OpenProgramError, ImportError):
    """A feature whose optional dependencies (an extra) are not installed."""


class SessionError(OpenProgramError):
    """A session that does not exist or cannot be used."""


class NoSession(SessionError):
    """Agentic code (``@function``, ``llm``) run outside any session."""


class LeaseLost(SessionError):
    """Another process decided this one was gone and took the lease of a function it runs
    (and may have marked it ``interrupted``); raised at this process's next write there,
    instead of writing into work that is no longer its own."""


class ModelError(OpenProgramError):
    """No model is configured, or the provider failed with something other than an overflow."""


class StepLimitExceeded(OpenProgramError):
    """An LLM call used all its steps (model turns) without a final answer."""


class OutputValidationError(OpenProgramError, ValueError):
    """A structured answer that still does not validate after one repair turn."""


class ToolDefinitionError(OpenProgramError, TypeError):
    """A Python callable that cannot be offered to a model as a tool."""


class MalformedMessage(OpenProgramError, ValueError):
    """A framework's message an adapter cannot store as it is (a tool call without an id, a
    result naming no call); says which message of the history, and what is wrong with it."""


class UsageError(OpenProgramError):
    """A command line that does not make sense (exit code 2): a ``--db`` that names a
    folder, say, whoever checks it (the command line, the viewer, the proxy)."""


class ConfigWarning(UserWarning):
    """A session's stored configuration has a setting this version cannot run with
    (written by hand, or by a version that did not check it): the warning names the
    session, the setting and its value, and the session runs with the default instead,
    so its history stays readable."""
