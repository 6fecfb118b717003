from django.urls import path

from monitor import views

app_name = "monitor"

urlpatterns = [
    path("", views.dashboard_page, name="dashboard"),
    path("dashboard.json", views.dashboard_json, name="dashboard-json"),
    path("selftest/", views.start_self_test, name="selftest"),
    path("models/", views.models_page, name="models"),
    path("models/download/", views.start_download, name="download"),
    path("models/download/<int:job_id>/cancel/", views.cancel_download, name="cancel"),
    path("models/download/<int:job_id>/resume/", views.resume_download, name="resume"),
    path("models/downloads.json", views.downloads_json, name="downloads-json"),
    path("models/planner/", views.planner_page, name="planner"),
    path("models/planner/apply/", views.apply_recommendation, name="apply"),
]
