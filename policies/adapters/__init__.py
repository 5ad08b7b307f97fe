"""Adapters between prunegate and the agent tooling people already use. Nothing here imports a
framework until its adapter is used (each needs its optional extra).

- Trimmers as policies: ``langchain`` runs LangChain's ``trim_messages`` under the gate (an id
  mapping turns what it dropped into an eviction proposal; docs/writing-a-policy.md).
- The gate inside agent frameworks (docs/frameworks.md): ``langchain_middleware`` (LangChain 1.x
  ``AgentMiddleware``), ``langgraph`` (``pre_model_hook``), ``pydantic_ai`` (a capability),
  ``openai_agents`` (``RunConfig.call_model_input_filter``), ``google_adk`` (``before_model_callback``); their converters both ways are
  ``langchain_messages``, ``pydantic_ai`` and ``responses`` (OpenAI Responses API items), sharing
  ``_native``.
"""
