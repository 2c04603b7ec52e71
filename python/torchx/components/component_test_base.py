"""``ComponentTestCase``, as TorchX's ``torchx.components.component_test_base``: checks that a
component function is one the CLI accepts (``torchx run file.py:fn --help``) and runs it on a
scheduler.

.. code-block:: python

    from torchx.components import utils
    from torchx.components.component_test_base import ComponentTestCase

    class MyComponentTest(ComponentTestCase):
        def test_my_comp(self) -> None:
            self.validate(utils, "echo")
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import unittest
from types import ModuleType
from typing import Any, Callable, Dict, Optional

from torchx.specs import AppDef, AppStatus


class ComponentTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self.test_dir = tempfile.mkdtemp("torchx_component_test")
        self.old_cwd = os.getcwd()
        os.chdir(os.path.dirname(os.path.dirname(__file__)))

    def tearDown(self) -> None:
        shutil.rmtree(self.test_dir)
        os.chdir(self.old_cwd)

    def validate(self, module: ModuleType, function_name: str) -> None:
        """Fails unless ``module.function_name`` passes the component linter and its
        ``--help`` renders, as ``torchx run /abs/path/module.py:function_name --help`` does."""
        from torchx.specs.builders import _create_args_parser
        from torchx.specs.finder import get_component

        path = module.__file__
        assert path, f"module must have __file__: {module}"
        component = get_component(f"{os.path.abspath(path)}:{function_name}")
        with self.assertRaises(SystemExit):
            _create_args_parser(component.fn).parse_args(["--help"])

    def run_component(
        self,
        component: Callable[..., AppDef],
        args: Optional[Dict[str, Any]] = None,
        scheduler_params: Optional[Dict[str, Any]] = None,
        scheduler: str = "local_cwd",
        interval: float = 0.1,
        timeout: float = 1,
    ) -> Optional[AppStatus]:
        """Runs ``component(**args)`` on ``scheduler`` and polls its status every
        ``interval`` seconds until it is terminal and at least ``timeout`` seconds passed."""
        from torchx.runner import get_runner

        app = component(**(args or {}))
        runner = get_runner(name=None, component_defaults=None, **(scheduler_params or {}))
        handle = runner.run(app, scheduler)
        elapsed = 0.0
        status = runner.status(handle)
        while (status and not status.is_terminal()) or elapsed < timeout:
            time.sleep(interval)
            elapsed += interval
            status = runner.status(handle)
        return status
