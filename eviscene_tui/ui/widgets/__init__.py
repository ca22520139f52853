"""eviscene-tui ui/widgets package."""
