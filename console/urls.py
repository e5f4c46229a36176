from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from console import views
from console.login import console_login

app_name = "console"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("login/", console_login, name="login"),
    path("logout/", auth_views.LogoutView.as_view(next_page="console:login"), name="logout"),
    path("dead-letters/", views.dead_letters, name="dead-letters"),
    path("dead-letters/selected", views.dead_letters_selected, name="dead-letters-selected"),
    path("dead-letters/replay-all", views.dead_letters_replay_all, name="dead-letters-replay-all"),
    path("dead-letters/jobs/<str:pk>", views.replay_job_status, name="replay-job"),
    path("dead-letters/<str:pk>/replay", views.dead_letter_replay_view, name="dead-letter-replay"),
    path(
        "dead-letters/<str:pk>/discard", views.dead_letter_discard_view, name="dead-letter-discard"
    ),
    path("deliveries/<str:pk>/", views.delivery, name="delivery"),
    path("deliveries/<str:pk>/retry", views.delivery_retry, name="delivery-retry"),
    path("endpoints/<str:pk>/", views.endpoint, name="endpoint"),
    path("endpoints/<str:pk>/action", views.endpoint_action, name="endpoint-action"),
    path("endpoints/<str:pk>/transport", views.endpoint_transport, name="endpoint-transport"),
    path("endpoints/<str:pk>/filter", views.filter_editor, name="filter"),
    path("endpoints/<str:pk>/filter/try", views.filter_editor_try, name="filter-try"),
    path("endpoints/<str:pk>/filter/save", views.filter_editor_save, name="filter-save"),
    path("tenants/", views.tenants, name="tenants"),
]
