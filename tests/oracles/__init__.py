"""Earlier implementations kept as test oracles: faster code must give their results."""
