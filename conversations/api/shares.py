"""REST endpoints over the share links of the caller's conversations: list, create, revoke."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.api.conversations import NOT_YOURS
from conversations.api.serializers import ShareLinkCreatedSerializer, ShareLinkSerializer
from conversations.models import ShareLink
from conversations.services.conversations import conversation_or_404
from conversations.services.shares import TooManyShares, share_create, share_revoke
from conversations.types import ConversationId


class ShareRefusedSerializer(serializers.Serializer[Any]):
    code = serializers.ChoiceField(choices=[TooManyShares.code])
    detail = serializers.CharField(help_text="Why, in words for people.")


@extend_schema_view(
    get=extend_schema(
        summary="The share links of one of your conversations, newest first",
        description="Revoked links stay listed, with `revoked_at`. A link's URL is not stored: "
        "it is shown only in the answer that creates it.",
        responses={200: ShareLinkSerializer(many=True), 404: NOT_YOURS},
    ),
    post=extend_schema(
        summary="Make a read-only link to the conversation as it is now",
        description="The link shows a snapshot: the title and the messages of the branch shown "
        "at this moment, to anyone who has it (signed in, where CHAT_SHARES_REQUIRE_LOGIN is "
        "set). Later messages are not shown. The answer holds the link's `url`, once. "
        "A user has at most CHAT_SHARES_PER_USER live (not revoked) links.",
        request=None,
        responses={
            201: ShareLinkCreatedSerializer,
            404: NOT_YOURS,
            429: OpenApiResponse(
                ShareRefusedSerializer,
                description="Over CHAT_SHARES_PER_USER live links (`too_many_shares`): revoke "
                "one to make another.",
            ),
        },
    ),
)
class ConversationShares(APIView):
    def get(self, request: Request, conversation_id: ConversationId) -> Response:
        conversation = conversation_or_404(user=request.user, conversation_id=conversation_id)
        shares = ShareLink.objects.owned_by(request.user).filter(conversation=conversation)
        return Response(ShareLinkSerializer(shares, many=True).data)

    def post(self, request: Request, conversation_id: ConversationId) -> Response:
        conversation = conversation_or_404(user=request.user, conversation_id=conversation_id)
        try:
            # Its owner is the caller (conversation_or_404 found it), typed as a signed-in user.
            share, token = share_create(conversation=conversation, created_by=conversation.owner)
        except TooManyShares as refused:
            return Response({"code": refused.code, "detail": str(refused)}, status=429)
        url = request.build_absolute_uri(reverse("share-view", kwargs={"token": token}))
        return Response(ShareLinkCreatedSerializer(share, context={"url": url}).data, status=201)


class ConversationShareDetail(APIView):
    @extend_schema(
        summary="Revoke a share link: from now on it answers 404",
        description="Revoking a revoked link changes nothing and answers 204 again.",
        responses={
            204: None,
            404: OpenApiResponse(description="No such link to a conversation of yours."),
        },
    )
    def delete(self, request: Request, conversation_id: ConversationId, share_id: int) -> Response:
        share = get_object_or_404(
            ShareLink.objects.owned_by(request.user).filter(conversation_id=conversation_id),
            pk=share_id,
        )
        share_revoke(share=share)
        return Response(status=204)
