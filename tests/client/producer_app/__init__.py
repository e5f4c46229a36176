"""A producer's small Django project that publishes events through the outbox.

tests/client/test_outbox_e2e.py runs it under gunicorn on a database of its own (not
Homing's), and runs `homing_relay` for it against a real Homing.
"""
