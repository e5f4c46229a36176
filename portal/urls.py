from __future__ import annotations

from django.urls import path

from portal import catalog_views, views

app_name = "portal"

urlpatterns = [
    path("", views.open_link, name="open"),
    path("session", views.exchange, name="exchange"),
    path("logout", views.log_out, name="logout"),
    path("endpoints/", views.endpoints, name="endpoints"),
    path("endpoints/new", views.endpoint_new, name="endpoint-new"),
    path("endpoints/<str:pk>/", views.endpoint, name="endpoint"),
    path("endpoints/<str:pk>/edit", views.endpoint_edit, name="endpoint-edit"),
    path("endpoints/<str:pk>/action", views.endpoint_action, name="endpoint-action"),
    path("endpoints/<str:pk>/transport", views.endpoint_transport, name="endpoint-transport"),
    path("endpoints/<str:pk>/dead-letters/", views.dead_letters, name="dead-letters"),
    path("endpoints/<str:pk>/recover", views.endpoint_recover_view, name="endpoint-recover"),
    path("dead-letters/<str:pk>/replay", views.dead_letter_replay_view, name="dead-letter-replay"),
    path("endpoints/<str:pk>/filter", catalog_views.filter_editor, name="filter"),
    path("endpoints/<str:pk>/filter/try", catalog_views.filter_editor_try, name="filter-try"),
    path("endpoints/<str:pk>/filter/save", catalog_views.filter_editor_save, name="filter-save"),
    path("event-types/", catalog_views.catalog, name="catalog"),
    path("event-types/<str:name>/action", catalog_views.catalog_action, name="catalog-action"),
    path("deliveries/<str:pk>/", views.delivery, name="delivery"),
    path("deliveries/<str:pk>/retry", views.delivery_retry, name="delivery-retry"),
]
