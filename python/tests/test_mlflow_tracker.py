"""``torchx.tracker.mlflow.MLflowTracker`` against MLflow's local file store (the real package,
``mlflow-skinny`` of the test extras): runs named by the job id, metadata as tags, artifacts with
their metadata, flattened params, and the tracker built from a ``.torchxconfig`` section."""

import os
from pathlib import Path

import pytest

mlflow = pytest.importorskip("mlflow", reason="mlflow is in the test extras: pip install '.[test]'")


def test_a_job_run_tracked_in_mlflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchx.tracker.mlflow import MLflowTracker

    monkeypatch.setenv("TORCHX_JOB_ID", "local_cwd://torchx/train-123")
    tracker = MLflowTracker(experiment_name="exp", tracking_uri=f"file://{tmp_path / 'store'}")
    try:
        run = "local_cwd://torchx/train-123"
        tracker.add_metadata(run, lr="0.1", epochs="3")
        checkpoint = tmp_path / "model.pt"
        checkpoint.write_bytes(b"weights")
        tracker.add_artifact(run, "model", str(checkpoint), {"format": "pt"})
        tracker.log_params_flat(run, {"trainer": {"lr": 0.1, "layers": [{"dim": 8}]}})
        assert tracker.metadata(run)["lr"] == "0.1"
        (artifact,) = tracker.artifacts(run).values()
        assert artifact.name == "model" and artifact.metadata["format"] == "pt"
        assert artifact.metadata["mlflow.file_size"] == len(b"weights")
        assert list(tracker.run_ids()) == [run]
        params = mlflow.get_run(tracker.get_run_id(run)).data.params
        assert params == {"trainer.lr": "0.1", "trainer.layers._0.dim": "8"}
        with pytest.raises(NotImplementedError):
            tracker.lineage(run)
    finally:
        tracker.close()


def test_create_tracker_reads_its_config_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchx.tracker.mlflow import create_tracker

    monkeypatch.delenv("TORCHX_JOB_ID", raising=False)
    monkeypatch.delenv("TORCHX_TRACKING_EXPERIMENT_NAME", raising=False)
    (tmp_path / ".torchxconfig").write_text(
        f"[tracker:mlflow]\nexperiment_name = from-config\ntracking_uri = file://{tmp_path / 's'}\n"
    )
    tracker = create_tracker(str(tmp_path))
    assert tracker.experiment_name == "from-config"
    assert os.path.isdir(tmp_path / "s")
