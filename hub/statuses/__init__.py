"""Commit statuses on the promotion pull requests of a control plane on GitHub or GitLab:
the gate's answer for a platform commit, set on the control-plane commit it carries."""
