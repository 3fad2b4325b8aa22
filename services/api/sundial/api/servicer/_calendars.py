"""JobService's calendar handlers."""

from __future__ import annotations

import grpc

from sundial.api import convert
from sundial.api.auth import current_tenant
from sundial.api.servicer._base import ServicerBase
from sundial.core.errors import InvalidArgument
from sundial.v1 import job_service_pb2 as pb


class CalendarHandlers(ServicerBase):
    """CreateCalendar, GetCalendar, ListCalendars, UpdateCalendar, DeleteCalendar."""

    async def CreateCalendar(
        self, request: pb.CreateCalendarRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateCalendarResponse:
        if not request.HasField("calendar"):
            raise InvalidArgument("calendar", "is required")
        created = await self._calendars.create(
            current_tenant(), convert.calendar_in(request.calendar)
        )
        return pb.CreateCalendarResponse(calendar=convert.calendar_out(created))

    async def GetCalendar(
        self, request: pb.GetCalendarRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetCalendarResponse:
        found = await self._calendars.get(current_tenant(), request.name)
        return pb.GetCalendarResponse(calendar=convert.calendar_out(found))

    async def ListCalendars(
        self, request: pb.ListCalendarsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListCalendarsResponse:
        page = await self._calendars.list(
            current_tenant(), page_size=request.page_size, page_token=request.page_token
        )
        return pb.ListCalendarsResponse(
            calendars=[convert.calendar_out(c) for c in page.items],
            next_page_token=page.next_page_token,
        )

    async def UpdateCalendar(
        self, request: pb.UpdateCalendarRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateCalendarResponse:
        if not request.HasField("calendar"):
            raise InvalidArgument("calendar", "is required")
        updated, jobs = await self._calendars.update(
            current_tenant(),
            convert.calendar_in(request.calendar),
            list(request.update_mask.paths),
            expected_version=request.expected_version,
        )
        return pb.UpdateCalendarResponse(
            calendar=convert.calendar_out(updated), jobs_rescheduled=jobs
        )

    async def DeleteCalendar(
        self, request: pb.DeleteCalendarRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteCalendarResponse:
        await self._calendars.delete(
            current_tenant(), request.name, expected_version=request.expected_version
        )
        return pb.DeleteCalendarResponse()
