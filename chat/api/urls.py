from django.urls import path, re_path

from chat.api import views

app_name = "api"

urlpatterns = [
    path("models", views.models, name="models"),
    path("models/<path:name>", views.models, name="model"),
    path("chat/completions", views.relay_call, {"endpoint": "chat/completions"}, name="chat-completions"),
    path("completions", views.relay_call, {"endpoint": "completions"}, name="completions"),
    path("embeddings", views.relay_call, {"endpoint": "embeddings"}, name="embeddings"),
    path("rerank", views.relay_call, {"endpoint": "rerank"}, name="rerank"),
    re_path(r"^.*$", views.unknown),
]
