"""Update masks: which fields an Update call changes (AIP-134).

The one rule, for every update of the API (UpdateJob, UpdateCalendar,
UpdateNotificationChannel, UpdateTenant): **an empty mask names every field the update
may change**, each taken from the request (a field left unset there is reset to its
default). It was UpdateCalendar's rule from the start; the other updates refused an empty
mask, so no call that succeeded before means anything else now. A path the update may
not name is ``INVALID_ARGUMENT`` naming ``update_mask.paths[i]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sundial.core.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class UpdateMask:
    """What one update's mask may name.

    Attributes:
        fields: The fields the update may change, in the order an empty mask lists them.
        subpaths: Further paths allowed below them (``quotas.max_jobs``).
        problem: A resource's own check of a path, for masks that reach into messages
            (UpdateJob's ``schedule.dst.gap``): why the path is refused, or None. When
            given it replaces the membership test of ``fields`` and ``subpaths``.
    """

    fields: tuple[str, ...]
    subpaths: tuple[str, ...] = ()
    problem: Callable[[str], str | None] | None = None

    def _problem(self, path: str) -> str | None:
        if self.problem is not None:
            return self.problem(path)
        if path in self.fields or path in self.subpaths:
            return None
        return f"{path!r} cannot be updated (one of {', '.join(self.fields + self.subpaths)})"

    def paths(self, given: Iterable[str], field: str = "update_mask") -> list[str]:
        """The paths the update applies: ``given`` when every one is allowed, every
        updatable field when ``given`` is empty.

        Raises:
            InvalidArgument: A path the update may not name (``update_mask.paths[i]``).
        """
        paths = list(given)
        if not paths:
            return list(self.fields)
        for i, path in enumerate(paths):
            problem = self._problem(path)
            if problem is not None:
                raise InvalidArgument(f"{field}.paths[{i}]", problem)
        return paths
