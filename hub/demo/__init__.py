"""`fleetmark demo`: the reference scenario in real git repositories, scheduled, harvested and
played out by a simulated fleet against a hub of its own."""
