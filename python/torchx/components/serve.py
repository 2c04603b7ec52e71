"""Model serving components."""

from typing import Dict, Optional

import torchx
from torchx import specs
from torchx.components._builtin import call


def torchserve(
    model_path: str,
    management_api: str,
    image: str = torchx.IMAGE,
    params: Optional[Dict[str, object]] = None,
    dryrun: bool = False,
) -> specs.AppDef:
    """Registers a model archive with a TorchServe management API.

    Args:
        model_path: the fsspec path to the model archive file
        management_api: the URL to the root of the torchserve management API
        image: container to use
        params: torchserve parameters (see the management API's register call)
        dryrun: start the app, but do not perform actual work
    """
    return call(
        "serve.torchserve",
        (),
        dict(model_path=model_path, management_api=management_api, image=image, params=params, dryrun=dryrun),
    )
