"""Runs every :class:`~torchx.components.integration_tests.component_provider.ComponentProvider`
of a module on a scheduler: all are submitted, then waited for; each app's logs are printed
between ``=== BEGIN LOG <handle> (<state>)===`` and ``=== END LOG ... ===`` lines, and an
``AssertionError`` names how many did not succeed."""

from __future__ import annotations

import inspect
import json
import logging
import sys
from dataclasses import asdict
from types import ModuleType
from typing import Dict, List, Optional, Type

from torchx.components.integration_tests.component_provider import ComponentProvider
from torchx.specs import AppDef, AppHandle, AppState, AppStatus, CfgVal

log: logging.Logger = logging.getLogger(__name__)


class IntegComponentTest:
    """``IntegComponentTest().run_components(module, image, scheduler, cfg)``."""

    def run_components(
        self,
        module: ModuleType,
        image: str,
        scheduler: str,
        cfg: Dict[str, CfgVal],
        dryrun: bool = False,
        workspace: Optional[str] = None,
    ) -> None:
        from torchx.cli.cmd_log import get_logs
        from torchx.runner import get_runner

        app_defs = [self._app_def(cls(scheduler, image)) for cls in self._get_component_providers(module)]
        runner = get_runner("test-runner")
        jobs: Dict[AppHandle, Optional[AppStatus]] = {}
        for app in app_defs:
            info = runner.dryrun(app, scheduler, cfg=cfg, workspace=workspace)
            log.info("\nAppDef:\n%s", json.dumps(asdict(app), indent=4, default=str))
            log.info("\nScheduler Request:\n%s", info)
            if dryrun:
                log.info("dry run: `%s` not submitted to `%s`", app.name, scheduler)
                continue
            handle = runner.schedule(info)
            jobs[handle] = runner.status(handle)
            log.info("submitted application `%s`", handle)

        for handle in jobs:
            log.info("waiting for `%s` to finish...", handle)
            status = runner.wait(handle)
            if status is None:
                raise AssertionError(f"`{handle}` is gone: its scheduler has no status of it")
            log.info("app `%s` ended %s: %s", handle, status.state, status.msg)
            jobs[handle] = status

        for handle, status in jobs.items():
            state = status.state if status else AppState.UNKNOWN
            print(f"=== BEGIN LOG {handle} ({state})===")
            get_logs(sys.stdout, handle, regex=None, runner=runner)
            print(f"=== END LOG {handle} ({state}) ===")

        by_state: Dict[str, List[AppHandle]] = {}
        for handle, status in jobs.items():
            by_state.setdefault(str(status.state if status else AppState.UNKNOWN), []).append(handle)
        log.info("\n%s\n%s\n%s", "*" * 40, json.dumps(by_state, indent=4), "*" * 40)
        failed = sum(1 for s in jobs.values() if s is None or s.state != AppState.SUCCEEDED)
        if failed:
            raise AssertionError(f"{failed}/{len(jobs)} test jobs failed")

    @staticmethod
    def _app_def(provider: ComponentProvider) -> AppDef:
        provider.setUp()
        try:
            return provider.get_app_def()
        finally:
            provider.tearDown()

    def _get_component_providers(self, module: ModuleType) -> List[Type[ComponentProvider]]:
        """The concrete ComponentProvider classes defined or imported in ``module``."""
        return [
            attr
            for attr in (getattr(module, name) for name in dir(module))
            if inspect.isclass(attr) and issubclass(attr, ComponentProvider) and not inspect.isabstract(attr)
        ]
