from __future__ import annotations

from django.urls import path

from portal import views

app_name = "portal"

urlpatterns = [
    path("", views.open_link, name="open"),
]
