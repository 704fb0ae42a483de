"""Tests of the in-cluster agent: pure code, no database and no cluster."""
