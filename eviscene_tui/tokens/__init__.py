"""Token ids: tiny test/demo tokenizer, vision id families, decoding, diffs."""
