"""The errors of finding and loading components (``torchx.specs.finder``'s, where TorchX
defines them), below both the finder and the component-file loader that raise them."""


class ComponentValidationException(Exception):
    __module__ = "torchx.specs.finder"


class ComponentNotFoundException(Exception):
    __module__ = "torchx.specs.finder"
