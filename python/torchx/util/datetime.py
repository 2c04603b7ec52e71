"""TorchX's ``torchx.util.datetime``."""

from datetime import datetime, timedelta


def get_past_epoch_time(days_past: int) -> int:
    """The epoch time (seconds) ``days_past`` days before now."""
    return int((datetime.now() - timedelta(days_past)).timestamp())
