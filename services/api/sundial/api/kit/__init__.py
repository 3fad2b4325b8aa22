"""The request mechanics every resource of the API shares, each written once.

- :mod:`~sundial.api.kit.mask`: an update's field mask (:class:`UpdateMask`), with the
  one rule for an empty mask: it names every field the update may change.
- :mod:`~sundial.api.kit.version`: ``expected_version`` (:func:`check_expected_version`,
  :func:`require_version`): never negative; 0 writes unconditionally; any other value
  writes only at that version, else ``ABORTED VERSION_MISMATCH``.
- :mod:`~sundial.api.kit.idempotency`: ``request_id`` (:class:`Requests`): an earlier
  identical request answers again, a different one reusing the id is refused.
- :mod:`~sundial.api.kit.paging`: page tokens and the page loop (:class:`Pager`).

docs/design.md section 3 states these rules for the API's callers.
"""

from sundial.api.kit.idempotency import RequestKey, Requests, request_hash
from sundial.api.kit.mask import UpdateMask
from sundial.api.kit.paging import Cursor, Pager
from sundial.api.kit.version import check_expected_version, require_version

__all__ = [
    "Cursor",
    "Pager",
    "RequestKey",
    "Requests",
    "UpdateMask",
    "check_expected_version",
    "request_hash",
    "require_version",
]
