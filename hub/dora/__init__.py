"""DORA metrics per environment and workload: deployment frequency, lead time, change failure
rate and time to restore, from the rollouts the store's transitions and git history show."""
