"""Run options: what a scheduler takes, typed and checked (re-exported by
``torchx.specs.api``, where TorchX defines them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import (
    Any,
    Dict,
    List,
    Mapping,
    Optional,
    Union,
)

from torchx import _native
from torchx._record import Record as _Record

CfgVal = Union[str, int, float, bool, List[str], Dict[str, str], None]


def get_type_name(tp: Any) -> str:
    """``int`` for plain types, ``typing.List[str]`` for generic ones (as TorchX prints them)."""
    if getattr(tp, "__module__", "") != "typing" and hasattr(tp, "__name__"):
        return str(tp.__name__)
    return str(tp)


class cases:
    """Spelling conversions of option names (``StructuredOpts`` accepts camelCase aliases)."""

    @staticmethod
    def snake_to_camel(name: str) -> str:
        """``foo_bar_baz`` → ``fooBarBaz``."""
        first, *rest = name.split("_")
        return first + "".join(part.title() for part in rest)

    @staticmethod
    def camel_to_snake(name: str) -> str:
        """``fooBarBaz`` → ``foo_bar_baz``."""
        import re

        return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


@dataclass(init=False, repr=False, eq=False)
class runopt(_Record):
    """One run option of a scheduler."""

    default: CfgVal
    opt_type: Any
    is_required: bool
    help: str

    def __init__(self, default: CfgVal, opt_type: Any, is_required: bool, help: str) -> None:
        self.default = default
        self.opt_type = opt_type
        self.is_required = is_required
        self.help = help

    @property
    def is_type_list_of_str(self) -> bool:
        return self.opt_type in (List[str], list[str])

    @property
    def is_type_dict_of_str(self) -> bool:
        return self.opt_type in (Dict[str, str], dict[str, str])

    def cast_to_type(self, value: str) -> CfgVal:
        """``value`` (text) as this option's type: bools from the INI words (``true/1/yes/on``,
        ``false/0/no/off``, any case; ``ValueError`` otherwise), lists from ``a,b`` or ``a;b``,
        dicts from ``k:v,k2:v2``, and ``str``/``int``/``float`` by their constructors."""
        if self.opt_type is None:
            raise ValueError("runopt's opt_type cannot be `None`")
        if self.opt_type is bool:
            word = value.lower()
            if word in ("true", "1", "yes", "on"):
                return True
            if word in ("false", "0", "no", "off"):
                return False
            raise ValueError(
                f"`{value}` is not a valid bool literal, expected one of (case-insensitive):"
                " true/1/yes/on or false/0/no/off"
            )
        if self.is_type_list_of_str:
            return [v for v in value.replace(";", ",").split(",") if v]
        if self.is_type_dict_of_str:
            return dict(item.split(":", 1) for item in value.replace(";", ",").split(","))
        converted: CfgVal = self.opt_type(value)
        return converted


class InvalidRunConfigException(Exception):
    """A run config that does not fit the scheduler's ``runopts``."""

    def __init__(self, invalid_reason: str, cfg_key: str, cfg: Any) -> None:
        given = ", ".join(sorted(cfg.keys())) if hasattr(cfg, "keys") else str(cfg)
        super().__init__(f"{invalid_reason}. Given run configs: {given}")
        self.cfg_key = cfg_key


class runopts:
    """The run options a scheduler accepts: name → type, default, required, help."""

    def __init__(self) -> None:
        self._opts: Dict[str, runopt] = {}

    def __iter__(self) -> Any:
        return iter(self._opts.items())

    def __len__(self) -> int:
        return len(self._opts)

    def __or__(self, other: "runopts") -> "runopts":
        merged = runopts()
        merged._opts = {**self._opts, **other._opts}
        return merged

    def update(self, other: "runopts") -> None:
        self._opts.update(other._opts)

    @staticmethod
    def is_type(obj: CfgVal, tp: Any) -> bool:
        """``isinstance`` that also understands ``List[str]`` and ``Dict[str, str]``."""
        try:
            return isinstance(obj, tp)
        except TypeError:
            if isinstance(obj, list):
                return all(isinstance(e, str) for e in obj)
            if isinstance(obj, dict):
                return all(isinstance(k, str) and isinstance(v, str) for k, v in obj.items())
            return False

    def add(
        self,
        cfg_key: str,
        type_: Any,
        help: str,
        default: CfgVal = None,
        required: bool = False,
    ) -> None:
        """Adds an option; a required option must have no default, a default must be of
        ``type_`` (``ValueError`` otherwise)."""
        if required and default is not None:
            raise ValueError(f"Required option: {cfg_key} must not specify default value. Given: {default}")
        if default is not None and not runopts.is_type(default, type_):
            raise TypeError(f"Option: {cfg_key}, must be of type: {type_}. Given: {default} ({type(default).__name__})")
        self._opts[cfg_key] = runopt(default, type_, required, help)

    def _valid_options(self) -> str:
        return ", ".join(sorted(self._opts)) if self._opts else "(none declared)"

    def _unknown(self, key: str, cfg: Any) -> "InvalidRunConfigException":
        return InvalidRunConfigException(
            f"Unknown run option `{key}`. Valid options are: {self._valid_options()}", key, cfg
        )

    def canonical_key(self, name: str) -> Optional[str]:
        """The registered option ``name`` spells (itself, or the snake_case key of a camelCase
        alias such as ``clusterName``); ``None`` for an unknown name."""
        if name in self._opts:
            return name
        snake = cases.camel_to_snake(name)
        return snake if snake != name and snake in self._opts else None

    def get(self, name: str) -> Optional[runopt]:
        """The option ``name`` (a camelCase name finds its snake_case option)."""
        key = self.canonical_key(name)
        return None if key is None else self._opts[key]

    def _canonical(self, cfg: Mapping[str, Any], ignore_unknown: bool, keep_unknown: bool) -> Dict[str, Any]:
        """``cfg`` under each option's registered key: an unknown key raises (or, with
        ``ignore_unknown``, is kept or dropped); two spellings of one option with different
        values raise."""
        out: Dict[str, Any] = {}
        spelled: Dict[str, str] = {}
        for given, value in cfg.items():
            key = self.canonical_key(given)
            if key is None:
                if not ignore_unknown:
                    raise self._unknown(given, cfg)
                if keep_unknown:
                    out[given] = value
                continue
            if key in spelled and out[key] != value:
                raise InvalidRunConfigException(
                    f"Run option `{key}` was passed under two spellings (`{spelled[key]}` and"
                    f" `{given}`) with conflicting values. Pass it once, as `{key}`",
                    key,
                    cfg,
                )
            spelled.setdefault(key, given)
            out[key] = value
        return out

    def resolve(self, cfg: Any, *, ignore_unknown: bool = False) -> Dict[str, CfgVal]:
        """``cfg`` checked against these options, under their registered keys (camelCase
        aliases canonicalised), with defaults filled in. ``InvalidRunConfigException`` for an
        unknown key (``ignore_unknown=True`` lets it pass through, for a facade scheduler
        that hands the cfg on), two spellings with different values, a missing required
        option or a value of the wrong type."""
        resolved: Dict[str, CfgVal] = self._canonical(cfg, ignore_unknown, keep_unknown=True)
        for key, opt in self._opts.items():
            value = resolved.get(key)
            if opt.is_required and value is None:
                raise InvalidRunConfigException(
                    f"Required run option: {key}, must be provided and not `None`", key, cfg
                )
            if value is not None and not runopts.is_type(value, opt.opt_type):
                raise InvalidRunConfigException(
                    f"Run option: {key}, must be of type: {get_type_name(opt.opt_type)},"
                    f" but was: {value} ({type(value).__name__})",
                    key,
                    cfg,
                )
            if value is None and key not in resolved:
                resolved[key] = opt.default
        return resolved

    def cfg_from_str(self, cfg_str: str) -> Dict[str, CfgVal]:
        """``k1=v1,k2=v2`` (``;`` too) cast to each option's type, under registered keys;
        an unknown key raises ``InvalidRunConfigException`` naming the valid options. Lists
        take ``,``/``;``-separated items, dicts ``k:v`` items, bools ``true``."""
        given: Dict[str, str] = dict(_native.ext.parse_kv(cfg_str))
        out: Dict[str, CfgVal] = {}
        for key, value in self._canonical(given, ignore_unknown=False, keep_unknown=False).items():
            out[key] = _cast(value, self._opts[key].opt_type)
        return out

    def cfg_from_json_repr(self, json_repr: str, *, ignore_unknown: bool = False) -> Dict[str, CfgVal]:
        """A stored cfg (JSON) under registered keys; an unknown key raises, or with
        ``ignore_unknown=True`` is dropped (cfgs stored before options were strict)."""
        import json

        out: Dict[str, CfgVal] = {}
        for key, value in self._canonical(json.loads(json_repr), ignore_unknown, keep_unknown=False).items():
            out[key] = _cast(value, self._opts[key].opt_type) if isinstance(value, str) else value
        return out

    def __repr__(self) -> str:
        required = [(k, o) for k, o in self._opts.items() if o.is_required]
        optional = [(k, o) for k, o in self._opts.items() if not o.is_required]
        usage = ",".join([f"{k}={k.upper()}" for k, _ in required] + [f"[{k}={k.upper()}]" for k, _ in optional])
        lines = ["    usage:", f"        {usage}", ""]
        if required:
            lines.append("    required arguments:")
            for k, o in required:
                lines.append(f"        {k}={k.upper()} ({get_type_name(o.opt_type)})")
                lines.append(f"            {o.help}")
            lines.append("")
        if optional:
            lines.append("    optional arguments:")
            for k, o in optional:
                lines.append(f"        {k}={k.upper()} ({get_type_name(o.opt_type)}, {o.default})")
                lines.append(f"            {o.help}")
            lines.append("")
        return "\n".join(lines)


def _cast(value: str, opt_type: Any) -> CfgVal:
    return runopt(None, opt_type, False, "").cast_to_type(value)
