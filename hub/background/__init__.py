"""Background work, a layer below the slices: the declaration of a periodic task (task.py),
the runtime that runs the declared tasks and the runs asked for through the API (runner.py,
the one module importing APScheduler), and the record of their runs (repository.py). Each
slice declares its own tasks in `<slice>/tasks.py`; hub/tasks.py lists them for the app."""
