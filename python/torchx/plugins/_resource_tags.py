"""The ``Resource.tags`` keys of named resources, below both what sets them (the registration
decorators) and what reads them (``Resource``, the plugin registry)."""


class resource_tags:
    """``Resource.tags`` keys that registered named-resource factories set on what they return
    (read them through ``Resource.get_resource_name()`` and ``Resource.is_fractional()``)."""

    RESOURCE_NAME: str = "torchx/named_resources.name"
    IS_FRACTIONAL: str = "torchx/named_resources.is_fractional"
