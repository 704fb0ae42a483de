"""`fleetmark demo`: the reference scenario in real git repositories, scheduled, harvested and
played out by a simulated fleet against a hub of its own or a running one (served to it over
git's HTTP protocol by hub/demo/gitserver.py)."""
