"""Adapters that put OpenProgram under agents built on other frameworks.

Each lives in its own module and imports its framework only there, so ``import openprogram``
never imports a framework (install the matching extra to use one):

- ``openprogram.integrations.pydantic_ai``: ``OpenProgramCapability``, a Pydantic AI
  capability (``pip install 'openprogram[pydantic-ai]'``);
- ``openprogram.integrations.langchain``: ``OpenProgramMiddleware``, a LangChain v1
  ``AgentMiddleware`` for ``create_agent`` (``[langchain]``);
- ``openprogram.integrations.openai_agents``: ``OpenProgramSession``, an OpenAI Agents SDK
  ``Session`` with its ``call_model_input_filter`` (``[openai-agents]``).

Each stores every message the framework sends or receives in the session's graph, renders
the compacted history into the framework's own message types for each model request (the
framework's own history is never rewritten), offers the history tools as the framework's
tools, and exposes the ``Session`` for layers, rollback, records, the CLI and notebooks.
Each conversation (a LangChain thread, a Pydantic AI conversation) is a session of its
own; within one, a history that goes another way (an edited or
retried message, a popped item) forks the graph where it diverged, a history that extends
any stored branch appends only what is new, and nothing stored is lost. A message the
graph cannot hold (a tool call without an id) is a ``MalformedMessage`` naming it.
``Mirror`` (with ``Entry`` and ``Paired``), ``Conversations`` and ``history_functions``
are what an adapter for another framework is built from.
"""

from openprogram._errors import MalformedMessage
from openprogram.integrations._history import history_functions
from openprogram.integrations._mirror import Entry, Mirror, Paired
from openprogram.integrations._threads import Conversations

__all__ = ["Conversations", "Entry", "MalformedMessage", "Mirror", "Paired", "history_functions"]
