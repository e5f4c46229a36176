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
    path("endpoints/<str:pk>/test", views.EndpointSendTest.as_view(), name="endpoint-test"),
    path("consumer-keys", views.ConsumerKeyList.as_view(), name="consumer-key-list"),
    path("consumer-keys/<str:pk>", views.ConsumerKeyDetail.as_view(), name="consumer-key-detail"),
    path("events", views.EventList.as_view(), name="event-list"),
    # Before `events/<pk>`, which would otherwise take "batch" for an id.
    path("events/batch", views.EventBatch.as_view(), name="event-batch"),
    path("events/<str:pk>", views.EventDetail.as_view(), name="event-detail"),
]
