"""JobService's notification channel handlers."""

from __future__ import annotations

import grpc

from sundial.api import convert
from sundial.api.auth import current_tenant
from sundial.api.notifications import channel_id_in
from sundial.api.servicer._base import ServicerBase
from sundial.v1 import job_service_pb2 as pb


class ChannelHandlers(ServicerBase):
    """Create, Get, List, Update and DeleteNotificationChannel."""

    async def CreateNotificationChannel(
        self, request: pb.CreateNotificationChannelRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateNotificationChannelResponse:
        channel = await self._channels.create(
            current_tenant(), convert.channel_spec_in(request.channel)
        )
        return pb.CreateNotificationChannelResponse(channel=convert.channel_out(channel))

    async def GetNotificationChannel(
        self, request: pb.GetNotificationChannelRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetNotificationChannelResponse:
        channel = await self._channels.get(current_tenant(), channel_id_in(request.channel_id))
        return pb.GetNotificationChannelResponse(channel=convert.channel_out(channel))

    async def ListNotificationChannels(
        self, request: pb.ListNotificationChannelsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListNotificationChannelsResponse:
        page = await self._channels.list(
            current_tenant(), page_size=request.page_size, page_token=request.page_token
        )
        return pb.ListNotificationChannelsResponse(
            channels=[convert.channel_out(channel) for channel in page.items],
            next_page_token=page.next_page_token,
        )

    async def UpdateNotificationChannel(
        self, request: pb.UpdateNotificationChannelRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateNotificationChannelResponse:
        channel_id = channel_id_in(request.channel.channel_id, "channel.channel_id")
        channel = await self._channels.update(
            current_tenant(),
            channel_id,
            convert.channel_spec_in(request.channel),
            list(request.update_mask.paths),
            request.expected_version,
        )
        return pb.UpdateNotificationChannelResponse(channel=convert.channel_out(channel))

    async def DeleteNotificationChannel(
        self, request: pb.DeleteNotificationChannelRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteNotificationChannelResponse:
        await self._channels.delete(current_tenant(), channel_id_in(request.channel_id))
        return pb.DeleteNotificationChannelResponse()
