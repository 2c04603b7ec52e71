"""Metrics components."""

import torchx
from torchx import specs
from torchx.components._builtin import call


def tensorboard(
    logdir: str,
    image: str = torchx.IMAGE,
    timeout: float = 60 * 60,
    port: int = 6006,
    start_on_file: str = "",
    exit_on_file: str = "",
) -> specs.AppDef:
    """Serves Tensorboard on ``logdir``.

    Args:
        logdir: fsspec path to the Tensorboard logs
        image: image to use
        timeout: maximum time to run before exiting (seconds)
        port: the port to serve on
        start_on_file: start the server when the fsspec path is created
        exit_on_file: shutdown the server when the fsspec path is created
    """
    return call(
        "metrics.tensorboard",
        (),
        dict(
            logdir=logdir,
            image=image,
            timeout=timeout,
            port=port,
            start_on_file=start_on_file,
            exit_on_file=exit_on_file,
        ),
    )
