"""SageMaker training jobs that really run, on a local Docker engine (moto_ext.py's docker mode).

moto keeps a training job as a record that is Completed at once. In docker mode a job tagged
`aws-emulator: docker` runs instead (others keep the lifecycle emulation), its TrainingImage
taken from the local engine (nothing is pulled), as the SageMaker Developer Guide describes a
training container
("How Amazon SageMaker Runs Your Training Image", "How Amazon SageMaker Provides Training
Information", "Monitor and Analyze Training Jobs Using CloudWatch"):

  * one container per instance of ResourceConfig.InstanceCount, hosts algo-1 ... algo-N on a
    network of their own (each reaches the others by host name), each with
    /opt/ml/input/config/resourceconfig.json ({"current_host", "hosts"}) and
    hyperparameters.json, and /opt/ml/output, /opt/ml/model, /opt/ml/checkpoints;
  * the container runs AlgorithmSpecification.ContainerEntrypoint then ContainerArguments, in
    the job's Environment;
  * every host writes to CloudWatch group /aws/sagemaker/TrainingJobs, stream
    "<job>/algo-<N>-<epoch seconds>", while it runs;
  * the job ends when every host has exited: Completed when all exited 0, else Failed with
    FailureReason "AlgorithmError: " and the first failing host's /opt/ml/output/failure, or
    "AlgorithmError: , exit code: N" when it wrote none;
  * StopTrainingJob stops the containers (SIGTERM, SIGKILL after 10 s): Stopping, then Stopped.

Not emulated: MaxRuntimeInSeconds, input channels, S3 checkpoint sync, RetryStrategy.
"""
import json
import os
import shutil
import sys
import tempfile
import threading
import time

from batch_docker import pump_logs

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
# A running job's containers and whether it is being stopped, by job name (kept off the job:
# moto turns every attribute of a training job into its DescribeTrainingJob answer).
_RUNS = {}


def runs_here(job):
    """Whether the job asked to run: its tag `aws-emulator` is `docker` (other jobs keep the
    lifecycle emulation the other tests rely on)."""
    return any(t.get("Key") == "aws-emulator" and t.get("Value") == "docker" for t in job.tags or [])


def start(job, logs, aws_env, set_status):
    """Runs `job` in the background; `set_status(status, secondary, message)` records its state."""
    _RUNS[job.training_job_name] = {"containers": [], "stopping": False}
    threading.Thread(target=_run, args=(job, logs, aws_env, set_status), daemon=True).start()


def stop(job):
    run = _RUNS.get(job.training_job_name, {"containers": []})
    run["stopping"] = True
    for c in list(run["containers"]):
        try:
            c.stop(timeout=10)
        except Exception:
            pass


def _run(job, logs, aws_env, set_status):
    import docker

    client = docker.from_env()
    name = job.training_job_name
    spec = job.algorithm_specification
    count = int((job.resource_config or {}).get("InstanceCount") or 1)
    hosts = [f"algo-{i}" for i in range(1, count + 1)]
    root = tempfile.mkdtemp(prefix=f"sagemaker-{name}-")
    network = client.networks.create(f"sagemaker-{name}", driver="bridge")
    run = _RUNS[name]
    containers = run["containers"]
    pumps, dirs = [], []
    try:
        for host in hosts:
            ml = os.path.join(root, host)
            for d in ("input/config", "output", "model", "checkpoints", "output/data"):
                os.makedirs(os.path.join(ml, d), exist_ok=True)
            with open(os.path.join(ml, "input/config/resourceconfig.json"), "w") as f:
                json.dump({"current_host": host, "hosts": hosts, "network_interface_name": "eth0"}, f)
            with open(os.path.join(ml, "input/config/hyperparameters.json"), "w") as f:
                json.dump(job.hyper_parameters or {}, f)
            container = client.containers.create(
                spec["TrainingImage"],
                command=spec.get("ContainerArguments") or None,
                entrypoint=spec.get("ContainerEntrypoint") or None,
                environment={**aws_env(client), **(getattr(job, "environment", None) or {})},
                hostname=host,
                name=f"sagemaker-{name}-{host}",
                mounts=[docker.types.Mount("/opt/ml", ml, type="bind")],
                network=network.name,
                labels={"torchx-aws-emulator": name})
            network.disconnect(container)
            network.connect(container, aliases=[host])
            containers.append(container)
            dirs.append(ml)
        set_status("InProgress", "Training", "Training image download completed. Training in progress.")
        for host, container in zip(hosts, containers, strict=True):
            container.start()
            pump = threading.Thread(target=pump_logs, args=(logs, LOG_GROUP, f"{name}/{host}-{int(time.time())}", container),
                                    daemon=True)
            pump.start()
            pumps.append(pump)
        codes = [c.wait().get("StatusCode") for c in containers]
        for p in pumps:
            p.join(timeout=60)
        if run["stopping"]:
            set_status("Stopped", "Stopped", "The training job was stopped")
            return
        failed = [(code, ml) for code, ml in zip(codes, dirs, strict=True) if code != 0]
        if not failed:
            set_status("Completed", "Completed", "Training job completed")
            return
        code, ml = failed[0]
        try:
            with open(os.path.join(ml, "output/failure"), errors="replace") as f:
                said = f.read(1024).strip()
        except OSError:
            said = ""
        job.failure_reason = f"AlgorithmError: {said}" if said else f"AlgorithmError: , exit code: {code}"
        set_status("Failed", "Failed", "Training job failed")
    except Exception as e:  # the engine refused: the job fails as SageMaker's would
        job.failure_reason = f"ClientError: {e}"
        set_status("Failed", "Failed", "Training job failed")
        print(f"sagemaker_docker: {name}: {e!r}", file=sys.stderr)
    finally:
        for c in containers:
            try:
                c.remove(force=True)
            except Exception:
                pass
        try:
            network.remove()
        except Exception:
            pass
        shutil.rmtree(root, ignore_errors=True)
        _RUNS.pop(name, None)
