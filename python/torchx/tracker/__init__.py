"""Experiment tracking (TorchX's ``torchx.tracker``): in a job launched by torchx,
``app_run_from_env()`` is its ``AppRun``::

    from torchx.tracker import app_run_from_env

    run = app_run_from_env()
    run.add_metadata(lr=0.01)
    run.add_artifact("model", "s3://bucket/model.pt")

The trackers come from ``[torchx:tracker]`` in ``.torchxconfig`` (or ``TORCHX_TRACKERS``);
``fsspec`` is builtin and shares its on-disk layout with ``torchx tracker ...``."""

from torchx.tracker.api import AppRun


def app_run_from_env() -> AppRun:
    """This job's ``AppRun`` (a singleton)."""
    return AppRun.run_from_env()


__all__ = ["AppRun", "app_run_from_env"]
