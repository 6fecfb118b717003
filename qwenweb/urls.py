from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from chat.web.account_views import AccountLoginView
from chat.web.oidc_views import ProviderCallback, ProviderLoginStart
from monitor.web import node_views
from monitor.web.dashboard_views import metrics_endpoint
from monitor.web.health_views import healthz
from qwenweb.script_catalogue import ScriptCatalogue

urlpatterns = [
    path("login/", AccountLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # OIDC login (docs/accounts.md): 404 while it is off.
    path("oidc/login/", ProviderLoginStart.as_view(), name="oidc-login"),
    path("oidc/callback/", ProviderCallback.as_view(), name="oidc-callback"),
    # Under /i18n/: a person who must change their password still gets it (chat.web.password_required).
    path("i18n/js/<str:language>/", ScriptCatalogue.as_view(), name="javascript-catalog"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("admin/", admin.site.urls),
    path("monitor/", include("monitor.urls")),
    path("metrics", metrics_endpoint, name="metrics"),
    path("healthz", healthz, name="healthz"),
    # An inference node's own calls (docs/nodes.md): JSON, a join token or the node's credential.
    path("nodes/join/", node_views.join, name="node-join"),
    path("nodes/register/", node_views.register, name="node-register"),
    path("nodes/check/", node_views.check, name="node-check"),
    path("v1/", include("chat.api.urls")),
    path("", include("chat.urls")),
]
