"""dlforge: a Python-embedded hardware generator for end-to-end deep-learning acceleration."""

__version__ = "0.1.0"
