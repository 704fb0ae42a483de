"""Suspects: the changes clusters regressed after, and the halts of their promotion."""
