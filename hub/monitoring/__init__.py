"""What /metrics says about the fleet and the hub's jobs: a snapshot of the store that every
replica reads alike, and the runs of the background jobs that every replica writes."""
