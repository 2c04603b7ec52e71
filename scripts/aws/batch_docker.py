"""AWS Batch jobs that really run, on a local Docker engine (moto_ext.py's docker mode).

moto 5.2.5's own Docker runner starts a job's containers but gives them none of Batch's node
environment, puts every node's output into one log stream after the job ends, and ignores the
job definition's retryStrategy. This replaces `moto.batch.models.Job.run` (the job's thread)
with one that follows the Batch documentation (User Guide: "Job lifecycle for MNP jobs",
"Automated job retries", "Job timeouts", "Multi-node parallel job environment variables"):

  * the main node starts first; the other nodes start once it runs, with
    AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS; every node gets AWS_BATCH_JOB_ID,
    AWS_BATCH_JOB_ATTEMPT (1, 2, ...), AWS_BATCH_JOB_NODE_INDEX, AWS_BATCH_JOB_NUM_NODES,
    AWS_BATCH_JOB_MAIN_NODE_INDEX and AWS_BATCH_JQ_NAME;
  * the attempt ends when the main node exits: its exit code is the job's; the other nodes are
    stopped (after AWS_EMU_CHILD_GRACE seconds, default 5, for them to finish by themselves);
  * every node of every attempt writes to its own CloudWatch stream (group /aws/batch/job,
    "<jobdef>/default/<job id>-<attempt>-<node>") while it runs;
  * a failed attempt is retried up to retryStrategy.attempts, unless the first matching
    evaluateOnExit rule (onExitCode / onStatusReason / onReason, '*' suffix = prefix) says EXIT;
    with rules and none matching, the attempt is retried;
  * timeout.attemptDurationSeconds kills the attempt ("Job attempt duration exceeded timeout"),
    which is not retried; TerminateJob stops every node and is not retried;
  * an image that cannot be pulled fails the attempt with "CannotPullContainerError: ...";
  * the containers reach this emulator as Batch's reach AWS with a job role: AWS_ENDPOINT_URL
    (a relay on the Docker bridge's gateway to the loopback-only server), the emulator's dummy
    credentials and AWS_REGION, unless the job's own environment sets them.

Node details (`describe_jobs(["<id>#N"])`) come from `job._emu_nodes`, filled here.
"""
import datetime
import os
import sys
import threading
import time

from moto.batch import models as bm

POLL = 0.2
CHILD_GRACE = float(os.environ.get("AWS_EMU_CHILD_GRACE", "5"))
LOG_GROUP = "/aws/batch/job"
TIMEOUT_REASON = "Job attempt duration exceeded timeout"

for attr in ("_get_attempt_duration", "_add_parameters_to_command", "_get_container_property", "_mark_stopped",
             "_start_attempt", "_stop_attempt", "docker_client"):
    if not hasattr(bm.Job, attr):
        raise SystemExit(f"batch_docker: moto's batch Job has no {attr}; this needs moto 5.2.x")


def _matches(pattern, value):
    """Batch's evaluateOnExit patterns: exact, or a prefix when they end in '*'."""
    if pattern is None:
        return True
    if value is None:
        return False
    return value.startswith(pattern[:-1]) if pattern.endswith("*") else value == pattern


def retry_action(rules, exit_code, status_reason, reason):
    """RETRY or EXIT for a failed attempt, by the first rule that matches (none: RETRY)."""
    code = None if exit_code is None else str(exit_code)
    for rule in rules or []:
        if (_matches(rule.get("onExitCode"), code) and _matches(rule.get("onStatusReason"), status_reason)
                and _matches(rule.get("onReason"), reason)):
            return str(rule.get("action", "RETRY")).upper()
    return "RETRY"


_relay = None
_relay_lock = threading.Lock()


def _aws_env(client):
    """What a job's containers need to call the emulator (AWS_EMU_URL, the server's own
    address, which containers cannot reach: it listens on loopback only). Starts, once, a TCP
    relay on the default bridge's gateway, which only this machine's containers reach."""
    global _relay
    import ipaddress
    import socket
    import socketserver
    from urllib.parse import urlsplit

    url = os.environ.get("AWS_EMU_URL")
    if not url:
        return {}
    with _relay_lock:
        if _relay is None:
            target = urlsplit(url)
            try:
                config = client.networks.get("bridge").attrs["IPAM"]["Config"][0]
                # Newer engines list no Gateway for the default bridge they addressed
                # themselves: it is then the subnet's first host (docker0's address).
                gateway = config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))
            except Exception as e:  # the jobs still run; they cannot call the emulator
                print(f"batch_docker: no bridge gateway for the relay ({e!r})", file=sys.stderr)
                return {}

            class Pipe(socketserver.BaseRequestHandler):
                def handle(self):
                    upstream = socket.create_connection((target.hostname, target.port))

                    def copy(src, dst):
                        try:
                            while data := src.recv(65536):
                                dst.sendall(data)
                        except OSError:
                            pass
                        finally:
                            try:
                                dst.shutdown(socket.SHUT_WR)
                            except OSError:
                                pass

                    back = threading.Thread(target=copy, args=(upstream, self.request), daemon=True)
                    back.start()
                    copy(self.request, upstream)
                    back.join()
                    upstream.close()

            server = socketserver.ThreadingTCPServer((gateway, 0), Pipe)
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()
            _relay = f"http://{gateway}:{server.server_address[1]}"
    region = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
    return {"AWS_ENDPOINT_URL": _relay, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing", "AWS_REGION": region, "AWS_DEFAULT_REGION": region}


def _safe(job_id):
    """A job id as container and log stream names may hold it."""
    return job_id.replace(":", "-")


def _container_spec(job, props, command):
    volumes = {v["name"]: v.get("host", {}).get("sourcePath") for v in props.get("volumes", [])}
    mounts = []
    for m in props.get("mountPoints", []):
        source = volumes.get(m["sourceVolume"])
        if source is None:
            raise ValueError(f"volume {m['sourceVolume']!r} has no host sourcePath (only host volumes run here)")
        mounts.append({"target": m["containerPath"], "source": source, "read_only": bool(m.get("readOnly"))})
    shm = (props.get("linuxParameters") or {}).get("sharedMemorySize")
    return {
        "image": props.get("image", "busybox"),
        "command": job._add_parameters_to_command(command),
        "environment": {e["name"]: e["value"] for e in props.get("environment", [])},
        "mounts": mounts,
        "shm_size": f"{int(shm)}m" if shm else None,
    }


def node_specs(job):
    """One container spec per node, in node-index order."""
    jd = job.job_definition
    if jd.container_properties:
        props = dict(jd.container_properties)
        for key in ("image", "volumes", "mountPoints", "environment", "command"):
            props[key] = job._get_container_property(key, props.get(key, []))
        return [_container_spec(job, props, props.get("command") or [])]
    nodes = jd.node_properties or {}
    count = int(nodes["numNodes"])
    by_index = {}
    for group in nodes.get("nodeRangeProperties", []):
        start, sep, end = group["targetNodes"].partition(":")
        first = int(start or 0)
        last = (int(end) if end else count - 1) if sep else first
        for i in range(first, last + 1):
            by_index[i] = group["container"]
    return [_container_spec(job, by_index[i], by_index[i].get("command") or []) for i in range(count)]


class _Node:
    """One node's container in one attempt, and its log pump."""

    def __init__(self, job, index, attempt):
        self.index = index
        # (An array child's id, `parent:i`, holds a `:`, which stream names may not.)
        self.stream = f"{job.job_definition.name}/default/{_safe(job.job_id)}-{attempt}-{index}"
        self.container = None
        self.pump = None
        self.status = "STARTING"
        self.exit_code = None
        self.ip = ""
        self.reason = None

    def state(self):
        if self.container is None:
            return None
        try:
            self.container.reload()
        except Exception:  # removed under us
            return "exited"
        return self.container.status


def pump_logs(logs, group, stream, container):
    """Copies a container's output, line by line as it comes, into CloudWatch stream `stream`
    of `group` (SageMaker's emulation uses it too)."""
    logs.ensure_log_group(group)
    logs.ensure_log_stream(group, stream)
    pending = b""
    for chunk in container.logs(stream=True, follow=True):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        now = int(time.time() * 1000)
        events = [{"timestamp": now, "message": line.decode(errors="replace")} for line in lines]
        if events:
            logs.put_log_events(group, stream, events)
    if pending:
        logs.put_log_events(group, stream,
                            [{"timestamp": int(time.time() * 1000), "message": pending.decode(errors="replace")}])


def _start(job, spec, node, env):
    import docker

    client = job.docker_client
    try:
        node.container = client.containers.run(
            spec["image"], spec["command"], detach=True,
            environment={**_aws_env(client), **spec["environment"], **env},
            mounts=[docker.types.Mount(m["target"], m["source"], type="bind", read_only=m["read_only"])
                    for m in spec["mounts"]],
            shm_size=spec["shm_size"],
            name=f"batch-{_safe(job.job_id)}-{env['AWS_BATCH_JOB_ATTEMPT']}-{node.index}",
            labels={"torchx-aws-emulator": job.job_id})
    except (docker.errors.ImageNotFound, docker.errors.NotFound) as e:
        node.reason = f"CannotPullContainerError: {e}"
        return False
    except docker.errors.APIError as e:
        node.reason = f"CannotStartContainerError: {e}"
        return False
    node.container.reload()
    networks = node.container.attrs.get("NetworkSettings", {}).get("Networks", {})
    node.ip = next((n.get("IPAddress") for n in networks.values() if n.get("IPAddress")), "")
    node.status = "RUNNING"
    node.pump = threading.Thread(target=pump_logs, args=(job._log_backend, LOG_GROUP, node.stream, node.container),
                                 daemon=True)
    node.pump.start()
    return True


def _finish(node, killed):
    if node.container is None:
        node.status = "FAILED"
        return
    if node.state() == "running":
        try:
            node.container.kill()
        except Exception:
            pass
    result = node.container.wait()
    node.exit_code = result.get("StatusCode")
    if node.pump is not None:
        node.pump.join(timeout=60)  # a loaded engine can be slow to hand over the last lines
    node.status = "SUCCEEDED" if node.exit_code == 0 and not killed else "FAILED"
    try:
        node.container.remove(force=True)
    except Exception:
        pass


def _run_attempt(job, specs, attempt):
    """Runs one attempt; returns (main node's exit code, statusReason, whether it may be retried)."""
    main = int((job.job_definition.node_properties or {}).get("mainNode", 0))
    nodes = [_Node(job, i, attempt) for i in range(len(specs))]
    job._emu_nodes = nodes
    base = {"AWS_BATCH_JOB_ID": job.job_id, "AWS_BATCH_JOB_ATTEMPT": str(attempt),
            "AWS_BATCH_JOB_NUM_NODES": str(len(specs)), "AWS_BATCH_JOB_MAIN_NODE_INDEX": str(main),
            "AWS_BATCH_JQ_NAME": job.job_queue.name}
    index = (job.array_properties or {}).get("index")
    if index is not None:  # an array job's child
        base["AWS_BATCH_JOB_ARRAY_INDEX"] = str(index)
    duration = job._get_attempt_duration()
    deadline = time.monotonic() + duration if duration else None
    job.status = "STARTING"
    lead = nodes[main]
    if not _start(job, specs[main], lead, {**base, "AWS_BATCH_JOB_NODE_INDEX": str(main)}):
        return None, lead.reason, True
    job.job_started_at = datetime.datetime.now()
    job.log_stream_name = lead.stream
    job._start_attempt()
    job.status = "RUNNING"
    for node in nodes:
        if node is not lead:
            env = {**base, "AWS_BATCH_JOB_NODE_INDEX": str(node.index),
                   "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS": lead.ip}
            if not _start(job, specs[node.index], node, env):
                node.status = "FAILED"  # a child that cannot start changes nothing for the others
    reason, retryable = None, True
    while lead.state() == "running":
        if job.stop:
            reason, retryable = job.job_stopped_reason, False
            break
        if deadline is not None and time.monotonic() > deadline:
            reason, retryable = TIMEOUT_REASON, False
            break
        time.sleep(POLL)
    stopped = reason is not None
    _finish(lead, stopped)
    grace_end = time.monotonic() + (0 if stopped else CHILD_GRACE)
    for node in nodes:
        if node is lead:
            continue
        while node.state() == "running" and time.monotonic() < grace_end:
            time.sleep(POLL)
        _finish(node, stopped)
    if reason is None and lead.exit_code != 0:
        reason = "Essential container in task exited"
    return lead.exit_code, reason, retryable


def _wait_for_dependencies(job):
    """Batch's dependsOn: PENDING until every dependency SUCCEEDED; a failed one fails the job
    with Batch's status reason. False if the job must not run."""
    job.status = "PENDING"
    ids = [d["jobId"] for d in job.depends_on or []]
    while True:
        states = [getattr(job.all_jobs.get(i), "status", None) for i in ids]
        if any(s == "FAILED" for s in states):
            job.job_stopped_reason = "Dependent Job failed"
            job._mark_stopped(success=False)
            return False
        if all(s == "SUCCEEDED" for s in states):
            return True
        if job.stop:
            job._mark_stopped(success=False)
            return False
        time.sleep(POLL)


def run(job):
    """The job's thread: attempts until one succeeds, the retry strategy says stop, or it is stopped."""
    job._emu_docker = True
    if job.depends_on and not _wait_for_dependencies(job):
        return
    try:
        specs = node_specs(job)
    except (KeyError, ValueError) as e:
        job.job_stopped_reason = f"ClientException: {e}"
        job._mark_stopped(success=False)
        return
    strategy = job.job_definition.retry_strategy or {}
    allowed = max(1, int(strategy.get("attempts", 1) or 1))
    rules = strategy.get("evaluateOnExit") or []
    for attempt in range(1, allowed + 1):
        job.status = "RUNNABLE"
        if job.stop:
            job._mark_stopped(success=False)
            return
        exit_code, reason, retryable = _run_attempt(job, specs, attempt)
        job.exit_code = exit_code
        if job.latest_attempt is not None:
            job.latest_attempt["container"]["exitCode"] = exit_code
            job.latest_attempt["container"]["reason"] = reason
            job.latest_attempt["statusReason"] = reason
            job.job_stopped_at = datetime.datetime.now()
            job._stop_attempt()
        if exit_code == 0 and reason is None:
            job._mark_stopped(success=True)
            return
        last = attempt == allowed or not retryable or retry_action(rules, exit_code, reason, reason) == "EXIT"
        if last:
            job.job_stopped_reason = reason
            job._mark_stopped(success=False)
            return


def node_details(job, n, detail):
    """Fills `detail` (a copy of the job's description) with node `n`: its state in the current
    attempt, and its own log stream in every attempt."""
    attempts = []
    for k, attempt in enumerate(detail.get("attempts", []), 1):
        stream = f"{job.job_definition.name}/default/{_safe(job.job_id)}-{k}-{n}"
        attempts.append({**attempt, "container": {**attempt.get("container", {}), "logStreamName": stream}})
    detail["attempts"] = attempts
    nodes = getattr(job, "_emu_nodes", None) or []
    if n >= len(nodes):
        return
    node = nodes[n]
    if node.container is not None or node.status != "STARTING":
        detail["status"] = node.status
    container = {"logStreamName": node.stream}
    if node.exit_code is not None:
        container["exitCode"] = node.exit_code
    if node.ip:
        container["networkInterfaces"] = [{"privateIpv4Address": node.ip}]
    if node.reason:
        container["reason"] = node.reason
    detail["container"] = {**detail.get("container", {}), **container}
