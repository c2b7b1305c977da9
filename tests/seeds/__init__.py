"""Seed parity (issue 19): one browser test per feature of the five earlier tools the site replaces."""
