"""Events fleetmark tells subscribers about: written to a transactional outbox by the jobs that
judge them, sent to each matching subscription at least once by a background task."""
