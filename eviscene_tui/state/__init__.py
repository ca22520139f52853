"""Textual-free state: runs table rows, filters, sort, search, open cases and
view models built from the artifact layer. Nothing here imports Textual."""
