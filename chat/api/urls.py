from django.urls import path, re_path

from chat.api import views

app_name = "api"

urlpatterns = [
    path("models", views.models, name="models"),
    path("models/<path:name>", views.models, name="model"),
    path("chat/completions", views.chat_completions, name="chat-completions"),
    path("completions", views.completions, name="completions"),
    path("embeddings", views.embeddings, name="embeddings"),
    path("rerank", views.rerank, name="rerank"),
    re_path(r"^.*$", views.unknown),
]
