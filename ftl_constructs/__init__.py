"""Reusable constructs of the fine-tuning launch platform (one capability each)."""
