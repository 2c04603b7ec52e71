"""torchx.runner.config: .torchxconfig sections typed by a scheduler's run options, parsed by
the core as the CLI parses them, with TorchX's lookup and precedence."""

import io
from pathlib import Path

import pytest
from torchx.runner import config
from torchx.schedulers import get_scheduler_factories


def test_dump_then_load_gives_every_option_back() -> None:
    f = io.StringIO()
    config.dump(f)
    for name, factory in get_scheduler_factories().items():
        f.seek(0)
        cfg: dict = {}
        config.load(name, f, cfg)
        opts = factory("t").run_opts()
        for key, opt in opts:
            assert key in cfg, (name, key)
            if not opt.is_required and opt.default not in (None, [], {}):
                assert cfg[key] == opt.default, (name, key)


def test_load_types_values_and_keeps_what_the_caller_set() -> None:
    text = "[slurm]\npartition = gpu\nexclusive = True\nmail-user = a@b\n\n[local_cwd]\nprepend_cwd = yes\n"
    cfg: dict = {"partition": "mine"}
    config.load("slurm", io.StringIO(text), cfg)
    assert cfg == {"partition": "mine", "exclusive": True, "mail-user": "a@b"}
    cfg = {}
    config.load("local_cwd", io.StringIO(text), cfg)
    assert cfg == {"prepend_cwd": True}
    with pytest.raises(ValueError, match="not a registered scheduler"):
        config.load("nope", io.StringIO(text), {})
    with pytest.raises(ValueError, match="<config>:1: expected `key = value`"):
        config.load("slurm", io.StringIO("no section header\n"), {})


def test_sections_lookup_and_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    (home / ".torchxconfig").write_text("[component:dist.ddp]\nj = 2x8\n\n[local_cwd]\nlog_dir = /home-logs\n")
    (cwd / ".torchxconfig").write_text("[component:dist.ddp]\nj = 1x1\nimage = img\n[component:]\nx = 1\n")
    dirs = [str(home), str(cwd)]
    assert config.load_sections("component", dirs) == {"dist.ddp": {"j": "2x8", "image": "img"}}
    assert config.get_config("component", "dist.ddp", "image", dirs) == "img"
    assert config.get_configs("component", "nope", dirs) == {}
    cfg: dict = {}
    config.apply("local_cwd", cfg, dirs)
    assert cfg["log_dir"] == "/home-logs"
    monkeypatch.setenv("TORCHXCONFIG", str(cwd / ".torchxconfig"))
    assert config.find_configs(dirs) == [str(cwd / ".torchxconfig")]
    monkeypatch.setenv("TORCHXCONFIG", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError):
        config.find_configs(dirs)


def test_default_dirs_follow_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHXCONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".torchxconfig").write_text("[local_cwd]\nlog_dir = here\n")
    assert str(tmp_path / ".torchxconfig") in config.find_configs()
