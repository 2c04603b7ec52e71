"""TorchX's builtin components (``utils.echo``, ``dist.ddp``, ...)."""
