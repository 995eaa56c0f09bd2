"""The Top-K classification losses: one family, each on the package's loss base and registry."""
