"""The environment diff: how any set of environments differ in what they are meant to run
and what their clusters run, and why."""
