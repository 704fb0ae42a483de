"""Report ingest: agents post contract-v1 reports; the hub records state changes."""
