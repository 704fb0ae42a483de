"""The harvester: reads GitOps repositories (through hub.git) into the store.

Platform repos give each commit's assignments and promoted control-plane commit; application
repos the version, images and digest per target folder. Commits carry first-parent positions
(hub/git/ancestry.py); desired state is kept as validity ranges (ranges.py).
"""
