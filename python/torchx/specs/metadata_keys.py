"""Metadata keys and environment names schedulers write into submitted jobs (0.8's
``torchx.specs.metadata_keys``): exact spellings other tools join on."""

# The environment variable naming the launch context.
TORCHX_CONTEXT_NAME: str = "TORCHX_CONTEXT_NAME"

# "Not available": the value written when a context is unknown.
NA: str = "<<NA>>"


class app_metadata:
    """App-level metadata keys."""

    CONTEXT: str = "torchx/context"
    VERSION: str = "torchx/version"
    SCHEDULER: str = "torchx/scheduler"
    # Per-role keys are `torchx/roles.<role name>...`: role names hold no `.` or `/`, so the
    # first `.` after the prefix ends the role name.
    ROLES_PREFIX: str = "torchx/roles."
