"""Fleet dimensions shared by every capability: environments and cluster types."""
