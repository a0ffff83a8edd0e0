"""`make bench`: load and quality benchmark of the context engine over a local stack."""
