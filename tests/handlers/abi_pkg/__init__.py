"""A package, so a handler spec can have a dotted module path."""
