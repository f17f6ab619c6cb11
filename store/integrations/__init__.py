"""Adapters that plug the store into agent frameworks.

Each adapter lives in its own module and imports its framework when that module is
imported; nothing in the library imports an adapter. Install the matching extra:

- :mod:`store.integrations.agent_framework`: ``pip install 'chatledger[agent-framework]'``.
- :mod:`store.integrations.openai_agents`: ``pip install 'chatledger[openai-agents]'``.
- :mod:`store.integrations.langchain`: ``pip install 'chatledger[langchain]'``.
- :mod:`store.integrations.claude_agent_sdk`: ``pip install 'chatledger[claude-agent-sdk]'``
  (the adapter imports nothing of the SDK; the extra brings the SDK itself).
- :mod:`store.integrations.pydantic_ai`: ``pip install 'chatledger[pydantic-ai]'``
  (the ``ConversationStore``, and the ``ChatledgerHistory`` capability of
  :mod:`store.integrations.pydantic_ai_history`).

The adapters that open their own store share it through :mod:`store.integrations._shared`,
and give the model the recall tool of :mod:`store.integrations.recall` (it imports no
framework).
"""
