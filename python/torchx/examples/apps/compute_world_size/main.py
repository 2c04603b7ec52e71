"""``python -m torchx.examples.apps.compute_world_size.main [key.sub=value ...]``: prints the
configuration (``config/defaults.yaml`` with the overrides), then computes the world size."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, List

import yaml


class Config(dict):  # type: ignore[type-arg]
    """A mapping whose keys are also attributes (``cfg.main.backend``), as Hydra's configs."""

    def __getattr__(self, name: str) -> Any:
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(name) from None
        return Config(value) if isinstance(value, dict) else value


def load(overrides: List[str]) -> Config:
    """The defaults with ``key.sub=value`` overrides (values parsed as YAML scalars)."""
    cfg: Dict[str, Any] = yaml.safe_load((Path(__file__).parent / "config" / "defaults.yaml").read_text())
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or not key:
            raise SystemExit(f"overrides are key.sub=value, got `{override}`")
        *parents, leaf = key.split(".")
        node = cfg
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(value)
    return Config(cfg)


def run(cfg: Config) -> None:
    print(yaml.safe_dump(dict(cfg), sort_keys=False))
    if cfg.main.throws:
        raise RuntimeError(f"raising error because cfg.main.throws={cfg.main.throws}")
    from torchx.examples.apps.compute_world_size.module.util import compute_world_size

    compute_world_size(cfg)


def main(argv: List[str]) -> None:
    cfg = load(argv)
    try:
        # torchelastic's error file: the scheduler reports the failing rank's exception.
        from torch.distributed.elastic.multiprocessing.errors import record
    except ImportError:
        run(cfg)
    else:
        record(run)(cfg)


if __name__ == "__main__":
    main(sys.argv[1:])
