"""The Textual user interface (imported lazily by the CLI)."""
