"""The fair-share model: what a quota scheduler should settle on, for the validator to expect.

Pure logic: ``fairshare`` (the model) and ``quota_lint`` (quota settings worth a warning). May
import the standard library only. Touches nothing.
"""
