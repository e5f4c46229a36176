from __future__ import annotations

from django.urls import path

from tests.client.producer_app import views

urlpatterns = [
    path("orders/", views.create_orders),
    path("outbox-age/", views.outbox_age),
]
