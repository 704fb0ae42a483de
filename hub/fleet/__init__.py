"""Read-only answers from the store's shared views: fleet state and deployment history."""
