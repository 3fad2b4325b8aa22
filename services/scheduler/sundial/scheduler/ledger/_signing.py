"""The ``Sundial-Signature`` of a run's call: :mod:`sundial.core.signing`, which the
API's notifier signs notifications with too."""

from sundial.core.signing import signature

__all__ = ["signature"]
