"""Explanations: why a decision landed where it did, and why an ask is still pending."""
