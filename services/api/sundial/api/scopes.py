"""Which scope each JobService method needs (docs/design.md section 7, "Scopes").

A TENANT token carries scopes (:class:`sundial.core.auth.Scope`); every JobService
method needs exactly one. The table is written out method by method, so a new method
is a decision: one missing here needs MANAGE, the narrowest grant, and
``tests/unit/test_scopes.py`` fails until it is listed.
"""

from __future__ import annotations

from sundial.core.auth import Scope
from sundial.core.errors import PermissionDenied

__all__ = ["METHOD_SCOPES", "check_scope", "required_scope"]

_READ = (
    "GetJob DescribeJob ListJobs PreviewSchedule ListRuns GetRun GetEgressPolicy "
    "ListJobRevisions ListAuditEvents GetCalendar ListCalendars GetNotificationChannel "
    "ListNotificationChannels ListFlowLimits CountJobs"
)
_WRITE = (
    "CreateJob BatchCreateJobs ApplyJob UpdateJob DeleteJob PauseJob ResumeJob TriggerJob "
    "BackfillJob ReplayRun CancelRun RollbackJob CreateCalendar UpdateCalendar "
    "DeleteCalendar CreateNotificationChannel UpdateNotificationChannel "
    "DeleteNotificationChannel SetFlowLimit DeleteFlowLimit PauseJobs ResumeJobs DeleteJobs "
    "TriggerJobs BatchApplyJobs"
)
_MANAGE = "RotateOwnSigningSecret CreateSecret UpdateSecret ListSecrets DeleteSecret"

METHOD_SCOPES: dict[str, Scope] = {
    **dict.fromkeys(_READ.split(), Scope.READ),
    **dict.fromkeys(_WRITE.split(), Scope.WRITE),
    **dict.fromkeys(_MANAGE.split(), Scope.MANAGE),
}
"""JobService method name -> the scope it needs."""


def required_scope(method: str) -> Scope:
    """The scope a JobService method (``/sundial.v1.JobService/ListJobs`` or
    ``ListJobs``) needs; MANAGE for one the table does not list."""
    return METHOD_SCOPES.get(method.rsplit("/", 1)[-1], Scope.MANAGE)


def check_scope(method: str, scopes: frozenset[Scope]) -> None:
    """Raise PermissionDenied (reason ``SCOPE_REQUIRED``, metadata ``scope``) unless
    ``scopes`` hold the scope ``method`` needs."""
    needed = required_scope(method)
    if needed in scopes:
        return
    name = method.rsplit("/", 1)[-1]
    held = ", ".join(sorted(s.value for s in scopes)) or "none"
    raise PermissionDenied(
        f"{name} needs a token with the '{needed.value}' scope (this token has: {held})",
        reason="SCOPE_REQUIRED",
        metadata={"scope": needed.value, "method": name},
    )
