"""The log's language: envelopes, input and output event models, the codec, and the log port."""
