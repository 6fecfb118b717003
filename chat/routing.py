from django.urls import path

from chat.web.consumers import ChatConsumer

websocket_urlpatterns = [path("ws/chat/", ChatConsumer.as_asgi())]
