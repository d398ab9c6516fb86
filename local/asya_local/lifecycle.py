"""The start/stop lifecycle both local meshes share (:class:`asya_local.mesh.LocalMesh`,
:class:`asya_local.artifact.mesh.ArtifactMesh`).

``start()`` does nothing while the mesh runs (``running``); otherwise it runs the subclass's ``_start()`` and, when
that raises anything (``KeyboardInterrupt`` included), calls ``stop()`` before re-raising, so a partial start leaves
no process, thread or socket behind. ``stop()`` must therefore undo any prefix of ``_start()``. A mesh is a context
manager: ``with`` starts it and stops it. :meth:`MeshLifecycle._require` turns a part that exists only while the mesh
runs into a clear :class:`~asya_local.exceptions.LocalModeError` instead of an ``AttributeError`` on ``None``.
"""

from __future__ import annotations

from types import TracebackType
from typing import ClassVar, Self, TypeVar

from asya_local.exceptions import LocalModeError

__all__ = ["MeshLifecycle"]

_T = TypeVar("_T")


class MeshLifecycle:
    """Base of a mesh: subclasses define ``running``, ``_start`` and ``stop``."""

    #: How the not-running error names the mesh ("the mesh", "the artifact mesh").
    _kind: ClassVar[str] = "the mesh"

    @property
    def running(self) -> bool:
        raise NotImplementedError

    def _start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        if self.running:
            return
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _require(self, part: _T | None) -> _T:
        if part is None:
            raise LocalModeError(f"{self._kind} is not running: call start() first")
        return part

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
