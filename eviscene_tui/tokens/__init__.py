"""Token ids: vision id families, decoding, diffs (the tiny test/demo tokenizer is scaffolding, ``scaffold/tiny.py``)."""
