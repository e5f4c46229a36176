"""The worker process's delivery machinery, owned by one `Worker` (worker.py)."""
