"""The host side of every tool call: resolve, validate, apply policy, dispatch, bound."""
