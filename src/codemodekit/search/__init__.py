"""Deterministic lexical search over the active catalog: tokenizer, index and ranking, response."""
