from __future__ import annotations

from django.urls import path

from dlq.api import views

urlpatterns = [
    path("dead-letters", views.DeadLetterList.as_view(), name="dead-letter-list"),
    path(
        "dead-letters/replay", views.DeadLetterBulkReplay.as_view(), name="dead-letter-replay-many"
    ),
    path(
        "dead-letters/discard",
        views.DeadLetterBulkDiscard.as_view(),
        name="dead-letter-discard-many",
    ),
    path("dead-letters/<str:pk>", views.DeadLetterDetail.as_view(), name="dead-letter-detail"),
    path(
        "dead-letters/<str:pk>/replay", views.DeadLetterReplay.as_view(), name="dead-letter-replay"
    ),
    path("endpoints/<str:pk>/stats", views.EndpointStats.as_view(), name="endpoint-stats"),
    path("endpoints/<str:pk>/recover", views.EndpointRecover.as_view(), name="endpoint-recover"),
]
