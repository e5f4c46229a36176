from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from portal.api.serializers import PortalLinkSerializer, PortalSessionCreateSerializer
from portal.services.sessions import portal_session_create
from webhooks.api.scoping import scope_of


class PortalSessionCreate(generics.GenericAPIView):
    """POST /portal-sessions: a one-time link to the consumer portal for one owner. The
    secret is in the URL fragment, which browsers never send, so no log keeps it."""

    serializer_class = PortalSessionCreateSerializer  # a consumer key gets 403 (IsTenant)

    @extend_schema(responses={201: PortalLinkSerializer})
    def post(self, request: Request) -> Response:
        incoming = PortalSessionCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        session, token = portal_session_create(
            tenant=scope_of(request).tenant, **incoming.validated_data
        )
        url = request.build_absolute_uri(reverse("portal:open")) + "#" + token
        return Response(
            PortalLinkSerializer({"url": url, "expires_at": session.expires_at}).data,
            status=status.HTTP_201_CREATED,
        )
