"""The runtime: sessions, agentic functions, the LLM loop, tools, models and leases."""
