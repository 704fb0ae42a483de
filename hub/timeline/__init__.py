"""The timeline: what happened to the fleet, merged in time order from the histories the other
slices keep (docs/concepts.md, "Timeline")."""
