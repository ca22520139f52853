"""eviscene-tui: a terminal workbench for EviScene PSD repair searches."""

__version__ = "0.1.0"
