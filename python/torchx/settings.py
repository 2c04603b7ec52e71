"""The names of every ``TORCHX_*`` (and ``TORCHXCONFIG``) environment variable TorchX reads,
in one place (0.8's ``torchx.settings``); the modules that used to define them re-export them."""

# Trackers (torchx.tracker.api).
ENV_TORCHX_TRACKERS: str = "TORCHX_TRACKERS"
ENV_TORCHX_PARENT_RUN_ID: str = "TORCHX_PARENT_RUN_ID"
ENV_TORCHX_JOB_ID: str = "TORCHX_JOB_ID"

# The .torchxconfig to read instead of searching for one (torchx.runner.config).
ENV_TORCHXCONFIG: str = "TORCHXCONFIG"

# The session id shared by the runner's events (torchx.util.session).
ENV_TORCHX_INTERNAL_SESSION_ID: str = "TORCHX_INTERNAL_SESSION_ID"

# The image builtin components default to (torchx.version).
ENV_TORCHX_IMAGE: str = "TORCHX_IMAGE"

# Which plugin channels torchx.plugins.registry() reads: 0 none, 1 namespace packages,
# 2 entry points, 3 both.
ENV_TORCHX_PLUGINS_SOURCE: str = "TORCHX_PLUGINS_SOURCE"
