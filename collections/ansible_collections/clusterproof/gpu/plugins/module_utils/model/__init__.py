"""The fair-share model: what a quota scheduler should settle on, for the validator to expect.

Pure logic. May import the standard library only. Touches nothing.
"""
