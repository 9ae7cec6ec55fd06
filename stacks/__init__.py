"""Deployable stacks: they assemble constructs and wire them, nothing more."""
