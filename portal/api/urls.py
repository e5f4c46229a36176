from __future__ import annotations

from django.urls import path

from portal.api import views

urlpatterns = [
    path("portal-sessions", views.PortalSessionCreate.as_view(), name="portal-session-create"),
]
