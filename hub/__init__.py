"""fleetmark hub: ingest, harvest, scheduling and queries over the fleet store."""

__version__ = "0.1.0"
