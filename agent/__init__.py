"""fleetmark agent: reports what each reconciler in a cluster has applied, and its health."""
