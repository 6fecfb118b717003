from django.urls import path

from monitor.web.consumers import DashboardConsumer

websocket_urlpatterns = [path("ws/monitor/", DashboardConsumer.as_asgi())]
