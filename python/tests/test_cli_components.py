"""``torchx run ./my_component.py:fn`` with the native CLI: the component is evaluated by the
Python that has this package (``$TORCHX_PYTHON``, else the one installed next to ``torchx``,
else ``python3`` on PATH), then run, dry-run or described by the Rust core."""

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Dict, Optional

import pytest

COMPONENT = textwrap.dedent('''
    import torchx.specs as specs
    from typing import Dict, List, Optional


    def greet(
        *script_args: str,
        user: str = "world",
        times: int = 1,
        loud: bool = False,
        tags: Optional[List[str]] = None,
        env: Optional[Dict[str, str]] = None,
        h: str = "cpu.small",
    ) -> specs.AppDef:
        """Greets someone.

        Says hello a number of times.

        Args:
            script_args: extra words
            user: who to greet
            times: how many greetings
            loud: shout
            tags: labels for the job
            env: extra environment
            h: host type
        """
        word = "HELLO" if loud else "hello"
        text = " ".join([word, user] * times + list(script_args))
        return specs.AppDef(
            name="greet",
            roles=[
                specs.Role(
                    name="greeter",
                    image="/tmp",
                    entrypoint="echo",
                    args=[text],
                    env=env or {},
                    resource=specs.resource(h=h),
                    metadata={"tags": ",".join(tags or [])},
                )
            ],
        )


    def needs_name(name: str) -> specs.AppDef:
        """Args:
            name: required
        """
        return specs.AppDef(name=name, roles=[specs.Role(name="r", image="x", entrypoint="true")])


    def untyped(x) -> specs.AppDef:
        return specs.AppDef(name="x")


    def raises(n: int = 1) -> specs.AppDef:
        raise ValueError(f"bad n={n}")


    def not_an_app() -> specs.AppDef:
        return 42
''')


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "my_component.py").write_text(COMPONENT)
    return tmp_path


def _torchx(
    torchx_bin: str, cwd: Path, *args: str, env: Optional[Dict[str, str]] = None
) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "TORCHX_PYTHON": sys.executable, **(env or {})}
    full_env.pop("RUST_BACKTRACE", None)
    return subprocess.run([torchx_bin, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=120)


def test_run_a_python_component_on_local_cwd(torchx_bin: str, project: Path) -> None:
    done = _torchx(
        torchx_bin,
        project,
        "run",
        "--scheduler",
        "local_cwd",
        "./my_component.py:greet",
        "--user",
        "your name",
        "--times",
        "2",
        "--loud",
        "True",
        "--",
        "and",
        "bye",
    )
    assert done.returncode == 0, done.stderr
    handle = done.stdout.strip().splitlines()[-1]
    assert handle.startswith("local_cwd://")
    log = _torchx(torchx_bin, project, "log", handle)
    assert "HELLO your name HELLO your name and bye" in log.stdout, log.stderr


def test_dryrun_shows_the_typed_arguments(torchx_bin: str, project: Path) -> None:
    done = _torchx(
        torchx_bin,
        project,
        "run",
        "--dryrun",
        "-s",
        "local_cwd",
        f"{project}/my_component.py:greet",
        "--tags",
        "a,b",
        "--env",
        "A=1,B=2",
        "-h",
        "cpu.nano",
    )
    assert done.returncode == 0, done.stderr
    assert "hello world" in done.stdout and "A" in done.stdout


def test_help_comes_from_the_docstring(torchx_bin: str, project: Path) -> None:
    for args in (
        ["run", "./my_component.py:greet", "--help"],
        ["run", "--dryrun", "./my_component.py:greet", "--help"],
    ):
        done = _torchx(torchx_bin, project, *args)
        assert done.returncode == 0, done.stderr
        assert "Greets someone." in done.stdout
        assert "who to greet (default: world)" in done.stdout


def test_component_defaults_from_torchxconfig(torchx_bin: str, project: Path) -> None:
    (project / ".torchxconfig").write_text("[component:./my_component.py:greet]\nuser = config user\n")
    done = _torchx(torchx_bin, project, "run", "--dryrun", "-s", "local_cwd", "./my_component.py:greet")
    assert done.returncode == 0, done.stderr
    assert "hello config user" in done.stdout


def test_builtins_print_shows_the_source(torchx_bin: str, project: Path) -> None:
    done = _torchx(torchx_bin, project, "builtins", "--print", "./my_component.py:needs_name")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("def needs_name(name: str) -> specs.AppDef:")


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["./my_component.py:needs_name"], 2, "the following arguments are required: --name"),
        (["./my_component.py:greet", "--times", "x"], 2, "argument --times: invalid int value: 'x'"),
        (["./my_component.py:untyped"], 2, "Missing type annotation for argument 'x'"),
        (["./my_component.py:raises"], 2, "the component raised ValueError: bad n=1"),
        (["./my_component.py:not_an_app"], 2, "returned int, not an AppDef"),
        (["./my_component.py:nope"], 4, "Function nope does not exist in file ./my_component.py"),
        (["./missing.py:greet"], 4, "component file `./missing.py` not found"),
        (["./my_component.py:1bad"], 2, "is not of the form `path.py:function_name`"),
    ],
)
def test_bad_components_and_arguments(torchx_bin: str, project: Path, args: list, code: int, message: str) -> None:
    done = _torchx(torchx_bin, project, "run", "--dryrun", "-s", "local_cwd", *args)
    assert done.returncode == code, (done.returncode, done.stderr)
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_a_python_without_the_package_is_named(torchx_bin: str, project: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    done = _torchx(
        torchx_bin,
        project,
        "run",
        "--dryrun",
        "./my_component.py:greet",
        env={"TORCHX_PYTHON": str(bare / "bin" / "python3")},
    )
    assert done.returncode == 4, done.stderr
    assert f"$TORCHX_PYTHON={bare}/bin/python3: has no torchx package" in done.stderr


def test_the_installed_torchx_finds_its_own_python(project: Path) -> None:
    installed = Path(sys.executable).parent / "torchx"
    if not installed.exists():
        pytest.skip("the torchx-rs-cli wheel is not installed next to this Python")
    env = {k: v for k, v in os.environ.items() if k != "TORCHX_PYTHON"}
    env["PATH"] = "/usr/bin:/bin"  # no other python3 with the package on PATH
    done = subprocess.run(
        [str(installed), "run", "--dryrun", "-s", "local_cwd", "./my_component.py:greet"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "hello world" in done.stdout


def test_entry_point_components_in_the_cli(torchx_bin: str, tmp_path: Path) -> None:
    """A distribution registering `torchx.components` in the environment of TORCHX_PYTHON: its
    components are listed by `torchx builtins` and run by name; builtins keep their names."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*")) / "site-packages"
    pkg = site / "my_comps"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text(
        COMPONENT.replace("def greet(", "def hello(")
        + textwrap.dedent('''

        def ddp(script: str) -> specs.AppDef:
            """Would shadow a builtin.

            Args:
                script: s
            """
            return specs.AppDef(name="shadow", roles=[specs.Role(name="r", image="x", entrypoint="false")])
    ''')
    )
    dist = site / "my_comps-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-comps\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[torchx.components]\n_0 = my_comps.train\n")
    # The venv sees this package through the environment it was created from.
    env = {"TORCHX_PYTHON": str(venv / "bin" / "python3"), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    listed = _torchx(torchx_bin, tmp_path, "builtins", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "components of the torchx.components entry points" in listed.stdout
    assert "hello" in listed.stdout and "needs_name" in listed.stdout
    done = _torchx(torchx_bin, tmp_path, "run", "--dryrun", "-s", "local_cwd", "hello", "--user", "plugin", env=env)
    assert done.returncode == 0, done.stderr
    assert "hello plugin" in done.stdout
    builtin = _torchx(
        torchx_bin, tmp_path, "run", "--dryrun", "-s", "local_cwd", "dist.ddp", "--script", "t.py", env=env
    )
    assert builtin.returncode == 0 and "torchrun" in builtin.stdout, builtin.stderr
    missing = _torchx(torchx_bin, tmp_path, "run", "--dryrun", "nope.nope", env=env)
    assert missing.returncode == 4 and "torchx.components entry point" in missing.stderr, missing.stderr


def _plugin_venv(tmp_path: Path, entry_points: str, module: str) -> Dict[str, str]:
    """A venv whose site-packages holds `my_plugin` and a dist-info declaring `entry_points`."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*")) / "site-packages"
    (site / "my_plugin.py").write_text(textwrap.dedent(module))
    dist = site / "my_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    return {"TORCHX_PYTHON": str(venv / "bin" / "python3"), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def test_named_resource_plugins_are_asked_only_for_a_name_nothing_else_defines(torchx_bin: str, tmp_path: Path) -> None:
    # Asking the plugins starts an interpreter: a job that names no resource, or a builtin
    # one, never does.
    marker = tmp_path / "imported"
    env = _plugin_venv(
        tmp_path,
        "[torchx.named_resources]\ngpu_x4 = my_plugin:gpu_x4\n",
        f"""
        import pathlib
        pathlib.Path({str(marker)!r}).touch()
        from torchx.specs import Resource

        def gpu_x4() -> Resource:
            return Resource(cpu=32, gpu=4, memMB=65536)
    """,
    )
    dryrun = ("run", "--dryrun", "--workspace", "", "-s", "kubernetes")
    for job in (("utils.echo",), ("dist.ddp", "--script", "t.py", "-h", "gpu.small")):
        done = _torchx(torchx_bin, tmp_path, *dryrun, *job, env=env)
        assert done.returncode == 0 and not marker.exists(), (job, done.stderr)
    done = _torchx(torchx_bin, tmp_path, *dryrun, "dist.ddp", "--script", "t.py", "-h", "gpu_x4", env=env)
    assert done.returncode == 0 and marker.exists(), done.stderr
    assert "nvidia.com/gpu: '4'" in done.stdout


def test_named_resource_plugins_in_the_cli(torchx_bin: str, tmp_path: Path) -> None:
    env = _plugin_venv(
        tmp_path,
        "[torchx.named_resources]\ngpu_x4 = my_plugin:gpu_x4\n",
        """
        from torchx.specs import Resource

        def gpu_x4() -> Resource:
            return Resource(cpu=32, gpu=4, memMB=65536, capabilities={"node.kubernetes.io/instance-type": "x4"})
    """,
    )
    done = _torchx(
        torchx_bin,
        tmp_path,
        "run",
        "--dryrun",
        "--workspace",
        "",
        "-s",
        "kubernetes",
        "dist.ddp",
        "--script",
        "t.py",
        "-h",
        "gpu_x4",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "nvidia.com/gpu: '4'" in done.stdout and "x4" in done.stdout
    missing = _torchx(
        torchx_bin,
        tmp_path,
        "run",
        "--dryrun",
        "--workspace",
        "",
        "-s",
        "kubernetes",
        "dist.ddp",
        "--script",
        "t.py",
        "-h",
        "gpu_x5",
        env=env,
    )
    assert missing.returncode == 4 and "gpu_x5" in missing.stderr, missing.stderr
    # $TORCHX_CUSTOM_NAMED_RESOURCES: a module's NAMED_RESOURCES
    (tmp_path / "custom_res.py").write_text(
        "from torchx.specs import Resource\nNAMED_RESOURCES = {'tiny': lambda: Resource(cpu=1, gpu=0, memMB=128)}\n"
    )
    env2 = {"TORCHX_CUSTOM_NAMED_RESOURCES": "custom_res", "PYTHONPATH": f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}"}
    done = _torchx(
        torchx_bin,
        tmp_path,
        "run",
        "--dryrun",
        "--workspace",
        "",
        "-s",
        "kubernetes",
        "dist.ddp",
        "--script",
        "t.py",
        "-h",
        "tiny",
        env=env2,
    )
    assert done.returncode == 0, done.stderr
    assert "memory: 128M" in done.stdout or "128Mi" in done.stdout, done.stdout[-800:]


def test_subcommand_plugins_in_the_cli(torchx_bin: str, tmp_path: Path) -> None:
    env = _plugin_venv(
        tmp_path,
        "[torchx.cli.cmds]\nmy_tool = my_plugin:CmdMyTool\nbroken = my_plugin:Broken\n",
        """
        import argparse
        from torchx.cli.cmd_base import SubCommand

        class CmdMyTool(SubCommand):
            def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
                subparser.add_argument("--config", type=str, help="Path to config file")
                subparser.add_argument("app_id", type=str, help="Application handle")

            def run(self, args: argparse.Namespace) -> None:
                print(f"Running my_tool on {args.app_id} with config={args.config}")

        class Broken(SubCommand):
            def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
                raise ImportError("no such dependency")

            def run(self, args: argparse.Namespace) -> None:
                pass
    """,
    )
    done = _torchx(torchx_bin, tmp_path, "my_tool", "--config", "c.yaml", "local_cwd://s/a", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Running my_tool on local_cwd://s/a with config=c.yaml"
    bad_args = _torchx(torchx_bin, tmp_path, "my_tool", env=env)
    assert bad_args.returncode == 2 and "the following arguments are required: app_id" in bad_args.stderr
    broken = _torchx(torchx_bin, tmp_path, "broken", env=env)
    assert broken.returncode == 5 and "entry point `broken` of torchx.cli.cmds cannot be loaded" in broken.stderr
    assert "Traceback" not in broken.stderr
    unknown = _torchx(torchx_bin, tmp_path, "nope", env=env)
    assert unknown.returncode == 2 and "unrecognized subcommand `nope`" in unknown.stderr


FILE_SCHEDULER = r'''
    import json, os
    from dataclasses import dataclass
    from typing import Any, Iterable, List, Mapping, Optional
    from torchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, StructuredOpts
    from torchx.specs import AppDef, AppDryRunInfo, AppState, ReplicaStatus, RoleStatus, runopts

    @dataclass
    class FileOpts(StructuredOpts):
        root: str
        """Directory holding the jobs."""

        prefix: str = "job"
        """Prefix of app ids."""

    @dataclass
    class Request:
        path: str
        app_id: str
        cmd: List[str]

    class FileScheduler(Scheduler):
        """Keeps jobs as files (a stand-in cluster)."""

        def __init__(self, session_name: str, **kwargs: Any) -> None:
            super().__init__("file_sched", session_name)

        def _run_opts(self) -> runopts:
            return FileOpts.as_runopts()

        def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo:
            opts = FileOpts.from_cfg(cfg)
            role = app.roles[0]
            app_id = f"{opts.prefix}-{app.name}"
            return AppDryRunInfo(Request(os.path.join(opts.root, app_id), app_id, [role.entrypoint, *role.args]), repr)

        def schedule(self, dryrun_info: AppDryRunInfo) -> str:
            r = dryrun_info.request
            with open(r.path, "w") as f:
                json.dump({"state": "RUNNING", "cmd": r.cmd}, f)
            return r.app_id

        def _path(self, app_id: str) -> str:
            return os.path.join(os.environ["FILE_SCHED_ROOT"], app_id)

        def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
            if not os.path.exists(self._path(app_id)):
                return None
            job = json.load(open(self._path(app_id)))
            state = AppState[job["state"]]
            return DescribeAppResponse(app_id=app_id, state=state, roles_statuses=[
                RoleStatus("echo", [ReplicaStatus(0, state, "echo", "host0")])])

        def list(self) -> List[ListAppResponse]:
            return [ListAppResponse(app_id=n, state=self.describe(n).state) for n in sorted(os.listdir(os.environ["FILE_SCHED_ROOT"]))]

        def _cancel_existing(self, app_id: str) -> None:
            json.dump({"state": "CANCELLED"}, open(self._path(app_id), "w"))

        def log_iter(self, app_id: str, role_name: str, k: int = 0, regex: Optional[str] = None,
                     since: Any = None, until: Any = None, should_tail: bool = False, streams: Any = None) -> Iterable[str]:
            return iter(["line one\n", "line two\n"])

    def create_scheduler(session_name: str, **kwargs: Any) -> FileScheduler:
        return FileScheduler(session_name)
'''


def test_python_scheduler_plugins_in_the_cli(torchx_bin: str, tmp_path: Path) -> None:
    root = tmp_path / "jobs"
    root.mkdir()
    env = _plugin_venv(tmp_path, "[torchx.schedulers]\nfile_sched = my_plugin:create_scheduler\n", FILE_SCHEDULER)
    env["FILE_SCHED_ROOT"] = str(root)
    opts = _torchx(torchx_bin, tmp_path, "runopts", "file_sched", env=env)
    assert opts.returncode == 0, opts.stderr
    assert "root=ROOT (str)" in opts.stdout and "Directory holding the jobs." in opts.stdout
    dry = _torchx(
        torchx_bin,
        tmp_path,
        "run",
        "--dryrun",
        "-s",
        "file_sched",
        "-cfg",
        f"root={root}",
        "utils.echo",
        "--msg",
        "hi",
        env=env,
    )
    assert dry.returncode == 0, dry.stderr
    assert "Request(" in dry.stdout and not list(root.iterdir())
    run = _torchx(
        torchx_bin,
        tmp_path,
        "run",
        "-s",
        "file_sched",
        "-cfg",
        f"root={root},prefix=p",
        "utils.echo",
        "--msg",
        "hi",
        env=env,
    )
    assert run.returncode == 0, run.stderr
    handle = run.stdout.strip().splitlines()[-1]
    assert handle == "file_sched://torchx/p-echo", run.stdout
    status = _torchx(torchx_bin, tmp_path, "status", handle, env=env)
    assert status.returncode == 0 and "RUNNING" in status.stdout, status.stderr
    listed = _torchx(torchx_bin, tmp_path, "list", "-s", "file_sched", env=env)
    assert "p-echo" in listed.stdout, listed.stderr
    log = _torchx(torchx_bin, tmp_path, "log", f"{handle}/echo/0", env=env)
    assert "line one" in log.stdout and "line two" in log.stdout, log.stderr
    cancel = _torchx(torchx_bin, tmp_path, "cancel", handle, env=env)
    assert cancel.returncode == 0, cancel.stderr
    assert "CANCELLED" in _torchx(torchx_bin, tmp_path, "status", handle, env=env).stdout
    missing_cfg = _torchx(torchx_bin, tmp_path, "run", "--dryrun", "-s", "file_sched", "utils.echo", env=env)
    assert missing_cfg.returncode == 3 and "root" in missing_cfg.stderr, missing_cfg.stderr


def test_cli_run_component_default_can_be_a_python_file(torchx_bin: str, project: Path) -> None:
    (project / ".torchxconfig").write_text("[cli:run]\ncomponent = ./my_component.py:greet\nscheduler = local_cwd\n")
    done = _torchx(torchx_bin, project, "run", "--dryrun")
    assert done.returncode == 0, done.stderr
    assert "hello world" in done.stdout


def test_python_tracker_plugins_in_the_cli(torchx_bin: str, tmp_path: Path) -> None:
    env = _plugin_venv(
        tmp_path,
        "[torchx.tracker]\njsonfile = my_plugin:create\n",
        """
        import json, os
        from typing import Iterable, Mapping, Optional
        from torchx.tracker.api import Lineage, TrackerArtifact, TrackerBase, TrackerSource

        class JsonFileTracker(TrackerBase):
            def __init__(self, path: str) -> None:
                self.path = path

            def _load(self) -> dict:
                return json.load(open(self.path)) if os.path.exists(self.path) else {}

            def _save(self, data: dict) -> None:
                json.dump(data, open(self.path, "w"))

            def add_metadata(self, run_id: str, **kwargs: object) -> None:
                data = self._load()
                data.setdefault(run_id, {}).update(kwargs)
                self._save(data)

            def metadata(self, run_id: str) -> Mapping[str, object]:
                return self._load().get(run_id, {})

            def add_artifact(self, run_id, name, path, metadata=None) -> None: ...
            def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
                return {"model": TrackerArtifact("model", "/m.pt", None)}
            def add_source(self, run_id, source_id, artifact_name=None) -> None: ...
            def sources(self, run_id, artifact_name=None) -> Iterable[TrackerSource]:
                return [TrackerSource("parent", None)]
            def lineage(self, run_id: str) -> Lineage:
                return Lineage()
            def run_ids(self, **kwargs: str) -> Iterable[str]:
                return list(self._load())

        def create(config: Optional[str]) -> JsonFileTracker:
            return JsonFileTracker(config)
    """,
    )
    env["TORCHX_TRACKER_JSONFILE_CONFIG"] = str(tmp_path / "runs.json")
    env["TORCHX_JOB_ID"] = "local_cwd://s/app-1"
    added = _torchx(
        torchx_bin, tmp_path, "tracker", "--tracker", "jsonfile", "add", "metadata", "lr=0.5", "opt=adam", env=env
    )
    assert added.returncode == 0, added.stderr
    md = _torchx(
        torchx_bin,
        tmp_path,
        "tracker",
        "--tracker",
        "jsonfile",
        "list",
        "metadata",
        "--json",
        "local_cwd://s/app-1",
        env=env,
    )
    assert md.returncode == 0, md.stderr
    assert json.loads(md.stdout) == {"lr": 0.5, "opt": "adam"}
    jobs = _torchx(torchx_bin, tmp_path, "tracker", "--tracker", "jsonfile", "list", "jobs", env=env)
    assert "local_cwd://s/app-1" in jobs.stdout, jobs.stderr
    arts = _torchx(torchx_bin, tmp_path, "tracker", "--tracker", "jsonfile", "list", "artifacts", "x", env=env)
    assert "/m.pt" in arts.stdout, arts.stderr


def test_a_component_that_hangs_is_killed_at_the_plugin_timeout(torchx_bin: str, project: Path) -> None:
    (project / "slow.py").write_text(
        textwrap.dedent('''
        import time
        import torchx.specs as specs

        def slow() -> specs.AppDef:
            """Never returns."""
            time.sleep(600)
            return specs.AppDef(name="x")
    ''')
    )
    started = time.monotonic()
    done = _torchx(torchx_bin, project, "run", "--dryrun", "./slow.py:slow", env={"TORCHX_PLUGIN_TIMEOUT": "2"})
    assert time.monotonic() - started < 30
    assert done.returncode == 5, done.stderr
    assert "gave no answer within 2 s (TORCHX_PLUGIN_TIMEOUT)" in done.stderr


MODULE_COMPONENTS = textwrap.dedent('''
    import torchx.specs as specs


    def hello(msg: str = "hi") -> specs.AppDef:
        """Says something.

        Args:
            msg: what to say
        """
        return specs.AppDef(name="hello", roles=[specs.Role(name="hello", image="/tmp", entrypoint="echo", args=[msg])])


    class Greeter:
        """Greets, as a class component.

        Args:
            msg: what to say
        """

        def __init__(self, msg: str = "hey") -> None:
            self.msg = msg

        def build(self) -> specs.AppDef:
            return specs.AppDef(name="greet", roles=[specs.Role(name="greet", image="/tmp", entrypoint="echo", args=[self.msg])])
''')


def test_a_module_on_the_python_path_names_components_as_the_nightly(torchx_bin: str, tmp_path: Path) -> None:
    (tmp_path / "my_pkg").mkdir()
    (tmp_path / "my_pkg" / "__init__.py").write_text("")
    (tmp_path / "my_pkg" / "comps.py").write_text(MODULE_COMPONENTS)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name, said in (
        ("my_pkg.comps:hello", "from a module"),
        ("my_pkg.comps:Greeter", "from a class"),
        ("my_pkg.comps.hello", "without the colon"),
        ("my_pkg.comps.Greeter", "a class without the colon"),
    ):
        done = _torchx(torchx_bin, elsewhere, "run", "--dryrun", "--json", name, "--msg", said, env=env)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["app"]["roles"][0]["args"] == [said]
    missing = _torchx(torchx_bin, elsewhere, "run", "my_pkg.nope:hello", env=env)
    assert missing.returncode == 4 and "Module `my_pkg.nope` not found on the python path" in missing.stderr
    for name in ("my_pkg.nope.hello", "my_pkg.comps.nope"):
        missing = _torchx(torchx_bin, elsewhere, "run", name, env=env)
        assert missing.returncode == 4 and f"component `{name}` not found" in missing.stderr, missing.stderr
    # A builtin's namespace stays the builtins': a typo is suggested, not imported.
    typo = _torchx(torchx_bin, elsewhere, "run", "utils.ehco", env=env)
    assert typo.returncode == 4 and "Did you mean `utils.echo`?" in typo.stderr, typo.stderr
