"""`python -m agent`: run the cluster agent with its FLEETMARK_AGENT_* settings."""

from agent.runner import main

raise SystemExit(main())
