"""Workspaces (TorchX's ``torchx.workspace``): a scheduler that mixes in ``WorkspaceMixin``
turns a role's local project directory into something its replicas run (an image, a copy)."""

from torchx.workspace.api import WorkspaceMixin, pin_workspace_images, walk_workspace

__all__ = ["WorkspaceMixin", "pin_workspace_images", "walk_workspace"]
