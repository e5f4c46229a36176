from __future__ import annotations

from django.urls import path

from deliveries.api import views

urlpatterns = [
    # The intake first (config/urls.py says why).
    path("events", views.EventList.as_view(), name="event-list"),
    # Before `events/<pk>`, which would otherwise take "batch" for an id.
    path("events/batch", views.EventBatch.as_view(), name="event-batch"),
    path("events/<str:pk>", views.EventDetail.as_view(), name="event-detail"),
    path("deliveries", views.DeliveryList.as_view(), name="delivery-list"),
    path("deliveries/<str:pk>", views.DeliveryDetail.as_view(), name="delivery-detail"),
    path("deliveries/<str:pk>/retry", views.DeliveryRetry.as_view(), name="delivery-retry"),
    path("endpoints/<str:pk>/messages", views.EndpointMessages.as_view(), name="endpoint-messages"),
    path("endpoints/<str:pk>/test", views.EndpointSendTest.as_view(), name="endpoint-test"),
    path(
        "endpoints/<str:pk>/filter-test",
        views.EndpointFilterTest.as_view(),
        name="endpoint-filter-test",
    ),
]
