"""Tests of the fleetmark hub on a real PostgreSQL, each in a transaction that is rolled back."""
