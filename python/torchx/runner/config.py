"""``.torchxconfig`` files from Python (TorchX's ``torchx.runner.config``): run-option defaults
per scheduler (``[local_cwd]``), component defaults (``[component:dist.ddp]``) and other
``[prefix:name]`` sections, the lookup order, and the ``torchx configure`` template.

The INI text is parsed by the core, as the CLI parses it; values are typed with the
scheduler's ``runopts``. Files are read in order and the first that sets a key wins; values a
caller already has are never overridden."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, TextIO, Tuple

from torchx.schedulers import get_scheduler_factories
from torchx.schedulers.api import Scheduler
from torchx.settings import ENV_TORCHXCONFIG  # re-exported: 0.7.0 defined it here
from torchx.specs import CfgVal, get_type_name
from torchx.specs.api import InvalidRunConfigException, runopt

log: logging.Logger = logging.getLogger(__name__)

CONFIG_FILE = ".torchxconfig"
CONFIG_PREFIX_DELIM = ":"
# Searched in order when no directories are given: $HOME, then the current directory (both
# taken when searching, so a later chdir counts; replace the list to search elsewhere).
DEFAULT_CONFIG_DIRS: List[str] = [str(Path.home()), str(Path.cwd())]
_IMPORT_TIME_DIRS = DEFAULT_CONFIG_DIRS

_NONE = "None"


def _sections(text: str, origin: str) -> List[Tuple[str, List[Tuple[str, str]]]]:
    from torchx import _native

    return _native.ext.parse_ini(text, origin)


def _read(f: TextIO) -> List[Tuple[str, List[Tuple[str, str]]]]:
    return _sections(f.read(), getattr(f, "name", "<config>"))


def _get_scheduler(name: str) -> Scheduler[Any]:
    factories = get_scheduler_factories()
    if name not in factories:
        raise ValueError(f"`{name}` is not a registered scheduler. Valid scheduler names: {list(factories)}")
    sched: "Scheduler[Any]" = factories[name](session_name="_")
    return sched


def _fixme_placeholder(opt: runopt, max_len: int = 60) -> str:
    text = f"#FIXME:({get_type_name(opt.opt_type)}) {opt.help}"
    return text if len(text) <= max_len else f"{text[:max_len]}..."


def _config_repr(opt: runopt) -> str:
    default = opt.default
    if isinstance(default, list):
        return ";".join(default) if default else _NONE
    if isinstance(default, dict):
        return ";".join(f"{k}:{v}" for k, v in default.items()) if default else _NONE
    return str(default).replace("%", "%%")


def dump(f: TextIO, schedulers: Optional[List[str]] = None, required_only: bool = False) -> None:
    """Writes the config template of ``schedulers`` (default: every registered one) to ``f``:
    a ``[scheduler]`` section each, required options as ``#FIXME:(type) help`` placeholders,
    optional ones (unless ``required_only``) with their defaults, each after its help as a
    comment. ``ValueError`` for an unknown scheduler."""
    for name in schedulers or list(get_scheduler_factories()):
        try:
            sched = _get_scheduler(name)
        except ModuleNotFoundError:
            continue
        lines = [f"[{name}]"]
        for opt_name, opt in sched.run_opts():
            if opt.is_required:
                value = _fixme_placeholder(opt)
            elif required_only:
                continue
            else:
                value = _config_repr(opt)
            lines += [f"# {' '.join(opt.help.split())}", f"{opt_name} = {value}"]
        f.write("\n".join(lines) + "\n\n")


def _cast(opt: runopt, value: str) -> CfgVal:
    # As 0.8: a config file's value parses exactly as the same `-cfg` value does.
    return opt.cast_to_type(value)


def load(scheduler: str, f: TextIO, cfg: Dict[str, CfgVal]) -> None:
    """Adds the ``[scheduler]`` section of the INI text in ``f`` to ``cfg``, typed by the
    scheduler's run options: keys already in ``cfg`` are kept, ``None`` is None, and options
    the scheduler does not have are skipped with a warning (a stale config must not break a
    run)."""
    opts = _get_scheduler(scheduler).run_opts()
    for section, pairs in _read(f):
        if section != scheduler:
            continue
        # As the nightly: a camelCase spelling loads under the registered key; two spellings
        # of one option in the file must agree.
        seen: Dict[str, Tuple[str, CfgVal]] = {}
        for name, value in pairs:
            key = opts.canonical_key(name) or name
            opt = opts.get(key)
            if opt is None:
                log.warning("`%s` is not a run option of %s; ignoring it", name, scheduler)
                continue
            if key not in seen and key in cfg:
                continue
            # an unset option is what `dump` writes for a None default
            parsed = None if value == _NONE else _cast(opt, value)
            if key in seen:
                first, earlier = seen[key]
                if earlier != parsed:
                    raise InvalidRunConfigException(
                        f"Run option `{key}` was declared in the [{section}] section under two "
                        f"spellings (`{first}` and `{name}`) with conflicting values. Keep one, as "
                        f"`{key}`",
                        key,
                        dict(pairs),
                    )
                continue
            seen[key] = (name, parsed)
            cfg[key] = parsed


def apply(scheduler: str, cfg: Dict[str, CfgVal], dirs: Optional[List[str]] = None) -> None:
    """Adds the ``[scheduler]`` defaults of the config files (``find_configs(dirs)``, first
    file first) to ``cfg`` without overriding what it has."""
    for path in find_configs(dirs):
        with open(path) as f:
            load(scheduler, f, cfg)
        log.info("loaded configs from %s", path)


def load_sections(prefix: str, dirs: Optional[List[str]] = None) -> Dict[str, Dict[str, str]]:
    """The ``[{prefix}:{name}]`` sections of the config files as ``{name: {key: value}}``
    (values as text; the first file that sets a key wins)."""
    sections: Dict[str, Dict[str, str]] = {}
    for path in find_configs(dirs):
        with open(path) as f:
            parsed = _read(f)
        for section, pairs in parsed:
            head, sep, name = section.partition(CONFIG_PREFIX_DELIM)
            if not sep or head != prefix or not head or not name:
                continue
            found = sections.setdefault(name, {})
            for key, value in pairs:
                found.setdefault(key, value)
    return sections


def get_configs(prefix: str, name: str, dirs: Optional[List[str]] = None) -> Dict[str, str]:
    """The ``[{prefix}:{name}]`` section (``{}`` if there is none)."""
    return load_sections(prefix, dirs).get(name, {})


def get_config(prefix: str, name: str, key: str, dirs: Optional[List[str]] = None) -> Optional[str]:
    """``key`` of the ``[{prefix}:{name}]`` section (None if absent)."""
    return get_configs(prefix, name, dirs).get(key)


def find_configs(dirs: Optional[Iterable[str]] = None) -> List[str]:
    """The config files to read, in order: ``$TORCHXCONFIG`` alone if set
    (``FileNotFoundError`` if it is not a file; none if it is empty), else ``.torchxconfig`` in each of ``dirs``
    (default ``DEFAULT_CONFIG_DIRS``: ``$HOME``, then the current directory) where readable."""
    override = os.getenv(ENV_TORCHXCONFIG)
    if override is not None:
        if not override:
            return []  # set and empty: no config file (0.8)
        if not Path(override).is_file():
            raise FileNotFoundError(f"`{ENV_TORCHXCONFIG}={override}` does not exist or is not a file.")
        return [override]
    if not dirs:
        dirs = DEFAULT_CONFIG_DIRS
        if dirs is _IMPORT_TIME_DIRS:
            dirs = [str(Path.home()), os.getcwd()]
    found: List[str] = []
    for d in dirs:
        path = Path(d) / CONFIG_FILE
        if os.access(path, os.R_OK) and str(path) not in found:
            found.append(str(path))
    return found
