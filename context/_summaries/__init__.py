"""Summaries: the request and result, the heuristic summarizer, the LLM summarizer and its
prompt, fitting, identifiers, prefetch.
"""
