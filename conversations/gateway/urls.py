from django.urls import path

from conversations.gateway import responses, views

urlpatterns = [
    path("chat/completions", views.chat_completions, name="gateway-chat-completions"),
    path("models", views.model_list, name="gateway-models"),
    path("models/<str:model>", views.model_detail, name="gateway-model"),
    path("responses", responses.responses, name="gateway-responses"),
    path("responses/<path:rest>", responses.stored_response),
    path("<path:rest>", views.not_served, name="gateway-not-served"),
]
