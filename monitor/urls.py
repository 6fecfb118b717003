from django.urls import path

from monitor.web import dashboard_views, health_views, model_views, node_views, profile_views

app_name = "monitor"

urlpatterns = [
    path("", dashboard_views.dashboard_page, name="dashboard"),
    path("dashboard.json", dashboard_views.dashboard_json, name="dashboard-json"),
    path("health/", health_views.health_page, name="health"),
    path("health.json", health_views.health_json, name="health-json"),
    path("selftest/", dashboard_views.start_self_test, name="selftest"),
    path("models/", model_views.models_page, name="models"),
    path("models/download/", model_views.start_download, name="download"),
    path("models/download/<int:job_id>/cancel/", model_views.cancel_download, name="cancel"),
    path("models/download/<int:job_id>/resume/", model_views.resume_download, name="resume"),
    path("models/downloads.json", model_views.downloads_json, name="downloads-json"),
    path("profiles/<int:profile_id>/download/", model_views.download_for_profile, name="profile-download"),
    path("models/planner/", model_views.planner_page, name="planner"),
    path("models/planner/apply/", model_views.apply_recommendation, name="apply"),
    path("nodes/", node_views.nodes_page, name="nodes"),
    path("nodes/tokens/", node_views.create_token, name="node-token-create"),
    path("nodes/tokens/<int:token_id>/revoke/", node_views.revoke_token, name="node-token-revoke"),
    path("nodes/<int:node_id>/remove/", node_views.remove_node, name="node-remove"),
    path("profiles/", profile_views.profile_list, name="profiles"),
    path("profiles/status.json", profile_views.profile_status, name="profiles-status"),
    path("profiles/new/", profile_views.profile_edit, name="profile-new"),
    path("profiles/<int:profile_id>/", profile_views.profile_detail, name="profile"),
    path("profiles/<int:profile_id>/edit/", profile_views.profile_edit, name="profile-edit"),
    path("profiles/<int:profile_id>/clone/", profile_views.profile_clone, name="profile-clone"),
    path("profiles/<int:profile_id>/delete/", profile_views.profile_delete, name="profile-delete"),
    path("profiles/<int:profile_id>/load/", profile_views.profile_load, name="profile-load"),
    path("profiles/<int:profile_id>/unload/", profile_views.profile_unload, name="profile-unload"),
]
