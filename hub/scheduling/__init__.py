"""The embedded scheduler in the hub: reads the control plane from git, renders it with
scheduler_core, commits the result to the platform GitOps repository and keeps the
assignments and errors in the store (`fleetmark schedule`, a periodic job, the API)."""
