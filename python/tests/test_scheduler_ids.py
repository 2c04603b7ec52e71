"""``torchx.schedulers.ids`` (TorchX's app-id helpers) and what the native CLI's scheduler host
makes of a Python scheduler: its pinned ids and its capabilities."""

import re
from typing import Any, List, Mapping

import pytest
from _inert import InertScheduler
from torchx.cli import _scheduler_host as host
from torchx.schedulers.ids import get_len_random_id, make_unique, pinned, random_id
from torchx.specs import AppDef, AppDryRunInfo, Resource, Role

ID = re.compile(r"^[bcdfghjklmnpqrstvwxz][bcdfghjklmnpqrstvwxz0-9]*$")


def test_make_unique_appends_a_kubernetes_safe_random_id() -> None:
    name, suffix = make_unique("trainer").split("-", 1)
    assert name == "trainer" and ID.match(suffix), suffix
    assert make_unique("a") != make_unique("a")
    assert len(make_unique("a", string_length=6)) == len("a-") + 6
    assert ID.match(random_id()) and ID.match(get_len_random_id(9))


def test_a_pinned_id_is_used_within_its_block_only() -> None:
    with pinned("fixed1"):
        assert make_unique("app") == "app-fixed1"
        assert make_unique("app", string_length=3) == "app-fix"
    assert make_unique("app") != "app-fixed1"
    with pinned(None):
        assert make_unique("app") != make_unique("app")


class _Minimal(InertScheduler[str]):
    def __init__(self) -> None:
        super().__init__("minimal", "s")

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo[str]:
        return AppDryRunInfo(make_unique(app.name), str)

    def schedule(self, dryrun_info: AppDryRunInfo[str]) -> str:
        return dryrun_info.request


def test_the_host_claims_what_the_scheduler_does_not_disclaim() -> None:
    caps = host._capabilities(_Minimal())
    # No log_iter of its own: no logs of any kind.
    assert not caps["logs"] and not caps["log_tail"] and not caps["log_streams"]
    assert caps["list"] and caps["cancel"] and caps["retries"] and caps["mounts"]

    class Lacking(_Minimal):
        unsupported_capabilities = frozenset({"mounts", "retries"})

        def log_iter(self, *args: Any, **kwargs: Any) -> List[str]:
            return []

    caps = host._capabilities(Lacking())
    assert caps["logs"] and caps["log_tail"] and not caps["mounts"] and not caps["retries"]


def test_an_unknown_capability_name_is_a_clear_error() -> None:
    class Typo(_Minimal):
        unsupported_capabilities = frozenset({"mount"})

    with pytest.raises(host._Failure, match=r"\['mount'\] are not capabilities \(one of describe_replicas"):
        host._capabilities(Typo())


def test_the_hosts_dry_run_uses_the_clis_id() -> None:
    from torchx.specs._json import app_to_json

    app = AppDef("job", [Role("r", "img", entrypoint="true", resource=Resource(1, 0, 64))])
    request = {"app": app_to_json(app), "cfg": {}, "context": {"unique": "pinnedid"}}
    assert host._dryrun(_Minimal(), request).request == "job-pinnedid"


def test_random_id_takes_torchx_08s_max_length() -> None:
    from torchx.schedulers.ids import random_id

    assert random_id(max_length=0) == "" and random_id(-1) == ""
    for n in (1, 5, 8):
        got = random_id(max_length=n)
        assert 0 < len(got) <= n and got[0].isalpha(), got
    assert 10 <= len(random_id()) <= 14


def test_validate_is_called_as_each_scheduler_defines_it() -> None:
    """TorchX 0.8 calls ``_validate(app, scheduler, cfg)``; a subclass written for 0.7
    overrides ``_validate(app, scheduler)``: the runner calls each as it is defined."""
    from typing import Any, List, Mapping, Optional, cast

    import pytest
    from torchx.schedulers.api import Scheduler, call_validate
    from torchx.specs import AppDef, Role

    seen: List[Any] = []

    class Old:
        def _validate(self, app: AppDef, scheduler: str) -> None:
            seen.append(("old", scheduler))

    class New:
        def _validate(self, app: AppDef, scheduler: str, cfg: Optional[Mapping[str, Any]] = None) -> None:
            seen.append(("new", scheduler, cfg))

    app = AppDef(name="a", roles=[Role(name="r", image="i")])
    for sched in (Old(), New()):
        call_validate(cast(Any, sched), app, "s", {"k": 1})
    assert seen == [("old", "s"), ("new", "s", {"k": 1})]
    # The base class's own check, called as 0.8 does.
    with pytest.raises(ValueError, match="No resource"):
        Scheduler._validate(cast(Any, object()), app, "s", cfg={})
