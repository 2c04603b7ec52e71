"""An MLflow tracker (TorchX's ``torchx.tracker.mlflow``): a TorchX run is an MLflow run named
by the job id (``TORCHX_JOB_ID``) in one experiment; metadata are run tags, artifacts are run
artifacts (their metadata tags under ``torchx.artifact_metadata``). Enable it in
``.torchxconfig``::

    [torchx:tracker]
    mlflow=

    [tracker:mlflow]
    config=/path/to/mlflow.ini   # a [tracker:mlflow] section: tracking_uri, experiment_name,
                                 # artifact_location

``mlflow`` (or ``mlflow-skinny``) must be installed where the job runs; it is imported with this
module, which only a job that uses the tracker imports.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from getpass import getuser
from pathlib import Path
from tempfile import gettempdir
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence

import mlflow
from mlflow import MlflowClient
from mlflow.entities import Experiment, Run

from torchx.distributed import on_rank0_first
from torchx.runner.config import get_configs
from torchx.tracker.api import (
    ENV_TORCHX_JOB_ID,
    Lineage,
    TrackerArtifact,
    TrackerBase,
    TrackerSource,
)

log: logging.Logger = logging.getLogger(__name__)

# Tags holding an artifact's metadata: ``<prefix>.<artifact name>.<key>``.
TAG_ARTIFACT_MD_PREFIX = "torchx.artifact_metadata"


class MLflowTracker(TrackerBase):
    """Tracks TorchX runs in the MLflow experiment ``experiment_name`` (created on first use;
    default ``default-experiment/<user>/<host>``) at ``tracking_uri`` (default a file store
    under the temp directory). In a job (``TORCHX_JOB_ID`` set) the job's run is started
    here, on rank 0 first."""

    def __init__(
        self,
        experiment_name: Optional[str] = None,
        tracking_uri: str = f"file://{Path(gettempdir()) / 'torchx' / 'mlruns'}",
        artifact_location: Optional[str] = None,
    ) -> None:
        if experiment_name is None:
            experiment_name = self.default_experiment_name()
        self.tracking_uri = tracking_uri
        if tracking_uri.startswith("file:") or ":" not in tracking_uri:
            # TorchX's default store is MLflow's file store, which newer MLflow versions refuse
            # unless opted in; a user's explicit setting wins.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        mlflow.set_tracking_uri(tracking_uri)
        log.info("MLflow tracking_uri=%s, artifact_location=%s", tracking_uri, artifact_location)
        with on_rank0_first():
            existing = mlflow.get_experiment_by_name(experiment_name)
            if existing:
                self.experiment: Experiment = existing
                log.info("Found existing experiment `%s` (id=%s)", experiment_name, self.experiment_id)
            else:
                experiment_id = mlflow.create_experiment(name=experiment_name, artifact_location=artifact_location)
                self.experiment = mlflow.get_experiment(experiment_id)
                log.info("Created new experiment `%s` (id=%s)", experiment_name, experiment_id)
            run_name = os.getenv(ENV_TORCHX_JOB_ID)
            if run_name:
                run = self.get_run(run_name)
                log.info("Primed run `%s` (%s)", run.info.run_name, run.info.run_id)

    @staticmethod
    def default_experiment_name() -> str:
        return f"default-experiment/{getuser()}/{socket.getfqdn()}"

    @property
    def experiment_id(self) -> str:
        return str(self.experiment.experiment_id)

    @property
    def experiment_name(self) -> str:
        return str(self.experiment.name)

    @property
    def artifact_location(self) -> str:
        return str(self.experiment.artifact_location)

    def get_run(self, run_name: str) -> Run:
        """The active run, else the run named ``run_name`` in the experiment (started — or
        resumed if it exists). ``RuntimeError`` if several runs have that name."""
        active = mlflow.active_run()
        if active is not None:
            return mlflow.get_run(active.info.run_id)
        found = mlflow.search_runs(
            experiment_ids=[self.experiment_id],
            output_format="list",
            filter_string=f"tags.`mlflow.runName` = '{run_name}'",
        )
        if not found:
            return mlflow.start_run(experiment_id=self.experiment_id, run_name=run_name)
        if len(found) == 1:
            return mlflow.start_run(experiment_id=self.experiment_id, run_id=found[0].info.run_id)
        raise RuntimeError(
            f"More than 1 run found for run_name `{run_name}` in experiment"
            f" `{self.experiment_name}`. Did you manually create runs with the same name under"
            " this experiment? Remove duplicate run names and try again"
        )

    def get_run_id(self, run_name: str) -> str:
        """The MLflow run id of ``run_name``."""
        return str(self.get_run(run_name).info.run_id)

    def close(self) -> None:
        mlflow.end_run()

    def add_artifact(self, run_id: str, name: str, path: str, metadata: Optional[Mapping[str, object]] = None) -> None:
        self.get_run(run_id)
        log.info("Writing artifact: %s, path: %s", name, path)
        mlflow.log_artifact(local_path=path, artifact_path=name)
        if metadata:
            mlflow.set_tags({f"{TAG_ARTIFACT_MD_PREFIX}.{name}.{k}": v for k, v in metadata.items()})

    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        client = MlflowClient(self.tracking_uri)
        mlflow_run_id = self.get_run(run_id).info.run_id
        tags = self.metadata(run_id)
        found: Dict[str, TrackerArtifact] = {}

        def walk(path: Optional[str] = None) -> None:
            for info in client.list_artifacts(mlflow_run_id, path=path):
                if info.is_dir:
                    walk(info.path)
                    continue
                name = path or "<SHOULD_NOT_HAPPEN>"
                prefix = f"{TAG_ARTIFACT_MD_PREFIX}.{name}."
                metadata: Dict[str, object] = {k[len(prefix) :]: v for k, v in tags.items() if k.startswith(prefix)}
                metadata["mlflow.file_size"] = info.file_size
                found[name] = TrackerArtifact(
                    name=name, path=f"{self.artifact_location}/{info.path}", metadata=metadata
                )

        walk()
        return found

    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        self.get_run(run_id)
        mlflow.set_tags(dict(kwargs))

    def metadata(self, run_id: str) -> Mapping[str, object]:
        return dict(self.get_run(run_id).data.tags)

    def run_ids(self, **kwargs: str) -> Iterable[str]:
        runs = mlflow.search_runs(experiment_ids=[self.experiment_id], output_format="list")
        return [r.info.run_name for r in runs]

    def log_params_flat(self, run_name: str, cfg: Any, key: str = "") -> None:
        """Logs ``cfg`` (a dataclass, mapping or sequence, nested) as MLflow params with dotted
        keys (``trainer.lr``; list items of non-primitives as ``key._<i>``)."""
        if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
            cfg = dataclasses.asdict(cfg)
        self.get_run(run_name)
        prefix = f"{key}." if key else ""

        def primitive(v: Any) -> bool:
            return isinstance(v, (str, int, float, bool))

        if not cfg:
            mlflow.log_param(key, cfg)
        elif isinstance(cfg, (Sequence, set)):
            if primitive(next(iter(cfg))):
                mlflow.log_param(key, cfg)
            else:
                for i, item in enumerate(cfg):
                    self.log_params_flat(run_name, item, f"{prefix}_{i}")
        elif isinstance(cfg, Mapping):
            for k, v in cfg.items():
                if primitive(v):
                    mlflow.log_param(f"{prefix}{k}", v)
                else:
                    self.log_params_flat(run_name, v, f"{prefix}{k}")

    def add_source(self, run_id: str, source_id: str, artifact_name: Optional[str] = None) -> None:
        raise NotImplementedError(f"Job's tracker sources is currently unsupported for {type(self).__qualname__}")

    def sources(self, run_id: str, artifact_name: Optional[str] = None) -> Iterable[TrackerSource]:
        raise NotImplementedError(f"Job's tracker sources is currently unsupported for {type(self).__qualname__}")

    def lineage(self, run_id: str) -> Lineage:
        raise NotImplementedError(f"Job's lineage is currently unsupported for {type(self).__qualname__}")


def create_tracker(config: str) -> MLflowTracker:
    """The tracker of the ``[tracker:mlflow]`` section of the config file ``config``
    (``$TORCHX_TRACKING_EXPERIMENT_NAME`` names the experiment when set)."""
    args: Dict[str, Any] = dict(get_configs(prefix="tracker", name="mlflow", dirs=[config]))
    args.pop("config", None)
    return MLflowTracker(
        experiment_name=os.getenv("TORCHX_TRACKING_EXPERIMENT_NAME", default=args.pop("experiment_name", None)),
        **args,
    )
