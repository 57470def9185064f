"""Replay tools: re-derive, verify, explain, state-at, export, what-if."""
