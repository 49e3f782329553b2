"""The resampler: Pillow's 8-bit resize in gateware (issue 18; the horizontal pass so far)."""
