from __future__ import annotations

from django.urls import path

from tests.e2e.payments_app import views

urlpatterns = [path("webhooks/homing/", views.payment_events)]
