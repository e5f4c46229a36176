"""A customer's small Django project that receives Homing's payment webhooks.

tests/e2e/test_receiver_e2e.py runs it under gunicorn, as a separate server on the
test database, to check `homing_receiver.django.webhook_view` against the real platform.
"""
