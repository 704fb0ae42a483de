"""The harvester: reads GitOps repositories (through hub.git) into the store.

Platform repos give the assignments each commit holds and the control-plane commit it
promotes; application repos give the workload version, images and digest per deployment
target folder. Commits carry their ancestry as first-parent positions (hub/git/ancestry.py) and
desired state is kept as validity ranges (ranges.py).
"""
