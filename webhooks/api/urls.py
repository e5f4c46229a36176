from __future__ import annotations

from django.urls import path

from webhooks.api import views

urlpatterns = [
    path("endpoints", views.EndpointList.as_view(), name="endpoint-list"),
    path("endpoints/<str:pk>", views.EndpointDetail.as_view(), name="endpoint-detail"),
    path(
        "endpoints/<str:pk>/rotate-secret",
        views.EndpointRotateSecret.as_view(),
        name="endpoint-rotate-secret",
    ),
    path("endpoints/<str:pk>/secret", views.EndpointSecret.as_view(), name="endpoint-secret"),
    path("event-types", views.EventTypeList.as_view(), name="event-type-list"),
    path("event-types/<str:name>", views.EventTypeDetail.as_view(), name="event-type-detail"),
    path("consumer-keys", views.ConsumerKeyList.as_view(), name="consumer-key-list"),
    path("consumer-keys/<str:pk>", views.ConsumerKeyDetail.as_view(), name="consumer-key-detail"),
]
