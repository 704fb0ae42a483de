"""Runs of the hub's background work as the API and /metrics tell them: the runs asked for
through the API (a harvest, a scheduling run) until they are done, and the snapshot of the
fleet and of the tasks' newest rounds that every replica exports alike."""
