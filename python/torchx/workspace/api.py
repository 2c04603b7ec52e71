"""``WorkspaceMixin``: the workspace hooks a Python scheduler implements."""

from __future__ import annotations

import abc
from typing import Dict, Generic, List, Mapping, TypeVar

from torchx.specs import AppDef, CfgVal, Role, runopts

T = TypeVar("T")


class WorkspaceMixin(abc.ABC, Generic[T]):
    """Mixed into a ``Scheduler`` that builds workspaces: the Runner calls
    ``build_workspaces`` before the dry run, and a scheduler implements
    ``caching_build_workspace_and_update_role`` (or the older
    ``build_workspace_and_update_role``) to point each role at what it built."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)

    def workspace_opts(self) -> runopts:
        """The run options of the workspace (added to the scheduler's)."""
        return runopts()

    def build_workspaces(self, roles: List[Role], cfg: Mapping[str, CfgVal]) -> None:
        """Builds the workspace of each role that has one, updating ``role.image`` (and maybe
        ``role.env``) in place; one cache per call so roles sharing a workspace build once."""
        cache: Dict[object, object] = {}
        for i, role in enumerate(roles):
            if role.workspace:
                old = role.image
                self.caching_build_workspace_and_update_role(role, cfg, cache)
                if old != role.image:
                    import logging

                    logging.getLogger(__name__).info(
                        "role[%d]=%s now runs %s (workspace changes)", i, role.name, role.image
                    )

    def caching_build_workspace_and_update_role(
        self, role: Role, cfg: Mapping[str, CfgVal], build_cache: Dict[object, object]
    ) -> None:
        """Builds ``role.workspace`` and points ``role`` at the result. The default merges a
        multi-project workspace into a temporary directory and calls
        ``build_workspace_and_update_role``."""
        workspace = role.workspace
        if not workspace:
            return
        if workspace.is_unmapped_single_project():
            self.build_workspace_and_update_role(role, str(workspace), cfg)
            return
        import tempfile

        with tempfile.TemporaryDirectory(suffix="torchx_workspace_") as outdir:
            workspace.merge_into(outdir)
            self.build_workspace_and_update_role(role, outdir, cfg)

    def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Builds the directory ``workspace`` and points ``role`` at the result (deprecated in
        TorchX in favour of ``caching_build_workspace_and_update_role``)."""
        raise NotImplementedError("implement `caching_build_workspace_and_update_role`")

    def dryrun_push_images(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> T:
        """What ``push_images`` would push for ``app`` (updating its images' names)."""
        raise NotImplementedError("dryrun_push is not implemented")

    def push_images(self, images_to_push: T) -> None:
        """Pushes what ``dryrun_push_images`` returned."""
        raise NotImplementedError("push is not implemented")
