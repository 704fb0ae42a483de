"""The harvester: reads GitOps repositories (GitPython, in hub.harvest.git only) into the store.

Platform repos give the assignments each commit holds and the control-plane commit it
promotes; application repos give the workload version, images and digest per deployment
target folder. Commits carry their ancestry as first-parent positions (ancestry.py) and
desired state is kept as validity ranges (ranges.py).
"""
