"""Git, as every slice asks it: a local clone (GitPython, in hub.git.local only), the spellings
of a repository's URL and their one normalised form (urls.py), and commit ancestry as
positions on each branch's first-parent chain (ancestry.py)."""
