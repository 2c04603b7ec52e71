"""TorchX plugins (the 0.8 line): factories decorated with :class:`register` in modules of the
``torchx_plugins.<group>`` namespace packages (``torchx_plugins.schedulers``,
``torchx_plugins.named_resources``, ``torchx_plugins.tracker``, ``torchx_plugins.event_handlers``),
found by :func:`registry`.

Entry points (``[project.entry-points."torchx.schedulers"]`` ...) are still read, as the
deprecated path; ``TORCHX_PLUGINS_SOURCE`` picks the channels (0 none, 1 namespace packages,
2 entry points, 3 both: the default). Unlike TorchX, a plugin adds to the builtins and never
replaces one: a plugin with a builtin's name is ignored with a warning where it is used.
"""

from torchx.plugins._registration import (
    EIGHTH,
    HALF,
    QUARTER,
    SIXTEENTH,
    WHOLE,
    halve_mem_down_to,
    powers_of_two_gpus,
    register,
    resource_tags,
)
from torchx.plugins._registry import PluginRegistry, PluginType, RegistrationError, registry

__all__ = [
    "EIGHTH",
    "HALF",
    "QUARTER",
    "SIXTEENTH",
    "WHOLE",
    "PluginRegistry",
    "PluginType",
    "RegistrationError",
    "halve_mem_down_to",
    "powers_of_two_gpus",
    "register",
    "registry",
    "resource_tags",
]
