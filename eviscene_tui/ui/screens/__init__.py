"""eviscene-tui ui/screens package."""
