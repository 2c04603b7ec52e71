"""The AppDefs of TorchX's component integration tests: a :class:`ComponentProvider` subclass
per builtin component, built for a scheduler and an image (for ``local_cwd`` the image is the
working directory). ``IntegComponentTest`` finds every concrete subclass in a module."""

from __future__ import annotations

import os
import tempfile
from abc import ABC, abstractmethod

from torchx.specs import AppDef


class ComponentProvider(ABC):
    """Builds one AppDef for ``scheduler`` and ``image``; ``setUp``/``tearDown`` prepare and
    clean what the app needs (files it reads or writes)."""

    def __init__(self, scheduler: str, image: str) -> None:
        self._scheduler = scheduler
        self._image = image

    @abstractmethod
    def get_app_def(self) -> AppDef: ...

    def setUp(self) -> None:
        pass

    def tearDown(self) -> None:
        pass

    def _local(self) -> bool:
        """Whether the app's files are this machine's (its replicas are local processes)."""
        return self._scheduler == "local_cwd"


class DDPComponentProvider(ComponentProvider):
    """``dist.ddp`` of the compute-world-size example: 2 nodes x 2 processes, with retries."""

    def get_app_def(self) -> AppDef:
        from torchx.components.dist import ddp

        return ddp(
            m="torchx.examples.apps.compute_world_size.main",
            name="ddp-trainer",
            image=self._image,
            cpu=1,
            j="2x2",
            max_retries=3,
            env={"LOGLEVEL": "INFO"},
        )


class BoothComponentProvider(ComponentProvider):
    def get_app_def(self) -> AppDef:
        from torchx.components.utils import booth

        return booth(x1=1.0, x2=2.0, image=self._image)


class ShComponentProvider(ComponentProvider):
    def get_app_def(self) -> AppDef:
        from torchx.components.utils import sh

        return sh("echo", "test", image=self._image)


class TouchComponentProvider(ComponentProvider):
    """``utils.touch`` of a file in the temporary directory (local) or the job's directory."""

    _name = "torchx_touch_test.txt"

    def __init__(self, scheduler: str, image: str) -> None:
        super().__init__(scheduler, image)
        self._file_path = ""

    def setUp(self) -> None:
        self._file_path = os.path.join(tempfile.gettempdir(), self._name) if self._local() else self._name

    def get_app_def(self) -> AppDef:
        from torchx.components.utils import touch

        return touch(file=self._file_path, image=self._image)

    def tearDown(self) -> None:
        if self._local() and os.path.exists(self._file_path):
            os.remove(self._file_path)


class CopyComponentProvider(ComponentProvider):
    """``utils.copy`` of a file written here (local), else of the image's README.md."""

    _name = "torchx_copy_test.txt"

    def __init__(self, scheduler: str, image: str) -> None:
        super().__init__(scheduler, image)
        self._src_path = self._dst_path = ""

    def setUp(self) -> None:
        if self._local():
            self._src_path = os.path.join(tempfile.gettempdir(), self._name)
            self._dst_path = f"{self._src_path}.copy"
            if not os.path.exists(self._src_path):
                with open(self._src_path, "w") as f:
                    f.write("test data")
        else:
            self._src_path, self._dst_path = "README.md", "README.md.copy"

    def get_app_def(self) -> AppDef:
        from torchx.components.utils import copy

        return copy(src=self._src_path, dst=self._dst_path, image=self._image)

    def tearDown(self) -> None:
        if self._local() and os.path.exists(self._dst_path):
            os.remove(self._dst_path)
