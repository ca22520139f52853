"""Artifact layer: pydantic models, loaders and integrity checks for PSD run files.

No Textual import anywhere in this package.
"""
