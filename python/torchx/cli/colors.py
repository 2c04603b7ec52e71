"""TorchX 0.7.0's home of the CLI colors (0.8 moved them to ``torchx.util.colors``)."""

from torchx.util.colors import BLUE, ENDC, GRAY, GREEN, ORANGE

__all__ = ["BLUE", "ENDC", "GRAY", "GREEN", "ORANGE"]
