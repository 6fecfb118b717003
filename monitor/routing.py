from django.urls import path

from monitor.consumers import DashboardConsumer

websocket_urlpatterns = [path("ws/monitor/", DashboardConsumer.as_asgi())]
