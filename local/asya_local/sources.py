"""Where the CDK app finds the runtime code it packages: ``asya_cdk.installed``, reached from the local mode.

:func:`source_root` is what the ``app.py`` of projects made by earlier releases calls (``asya init`` now writes one
that calls ``asya_cdk.installed`` itself): the checkout the packages are installed from, or, from a wheel, a tree
staged under ``staging`` from site-packages (:func:`asya_cdk.installed.installed_root`). It imports ``asya_cdk``
only when called, so the local mode runs without the ``cdk`` extra.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["source_root"]


def source_root(*, staging: Path) -> Path:
    """A source tree the CDK app can package; ``staging`` is used for wheel installs."""
    from asya_cdk.installed import installed_root  # the cdk extra: only a CDK app calls this

    return installed_root(staging=staging)
