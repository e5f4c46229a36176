from __future__ import annotations

from django.urls import path

from deliveries.api import views

urlpatterns = [
    path("deliveries", views.DeliveryList.as_view(), name="delivery-list"),
    path("deliveries/<str:pk>", views.DeliveryDetail.as_view(), name="delivery-detail"),
    path("deliveries/<str:pk>/retry", views.DeliveryRetry.as_view(), name="delivery-retry"),
    path("endpoints/<str:pk>/messages", views.EndpointMessages.as_view(), name="endpoint-messages"),
]
