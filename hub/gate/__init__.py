"""The promotion gate: may a commit (or a workload version) move on to the next environment?"""
