//! An in-process fake Kubernetes API server (HTTP on loopback) serving exactly the REST paths
//! the `kubernetes` and `kubernetes_mcad` schedulers use: create, get (and `/status`), list with
//! label selectors, merge-patch, delete, and pod logs (with `follow`). It records every request.
//!
//! Objects in namespace `auto` are driven by a tiny stand-in for the controllers and kubelet:
//! pods appear for Jobs, Volcano Jobs and AppWrappers, are Pending for a moment, Running, then
//! end as their `sh -c` script says (`echo x` logs `x` and succeeds, `exit N` fails, `sleep N`
//! of under a minute writes what came before it, then waits N seconds; a longer `sleep` runs
//! until cancelled). In any other namespace nothing moves unless a test says so.
//!
//! What this does not prove: that a real API server, admission webhooks, the Job/Volcano/MCAD
//! controllers and kubelets behave like this stand-in; only the requests and our reading of
//! the responses are checked (the manifests are validated against the schemas separately).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

type Body = BoxBody<Bytes, Infallible>;

/// Namespace whose objects the stand-in controller runs.
pub const AUTO: &str = "auto";
const PENDING_FOR: Duration = Duration::from_millis(150);
const RUNNING_FOR: Duration = Duration::from_millis(150);

#[derive(Default)]
pub struct Store {
    /// Collection path (`/apis/batch/v1/namespaces/ns/jobs`) → name → object.
    pub objects: BTreeMap<String, BTreeMap<String, Value>>,
    /// `ns/pod` → log text with API-server timestamps.
    pub logs: BTreeMap<String, String>,
    /// `METHOD path?query` of every request.
    pub requests: Vec<String>,
    /// The namespaces it has (besides those it holds objects in): the kubeconfig's and
    /// `default`.
    pub namespaces: std::collections::BTreeSet<String>,
    /// When each auto object was created.
    born: BTreeMap<String, Instant>,
    uid: u64,
}

pub struct FakeKube {
    pub addr: SocketAddr,
    pub store: Arc<Mutex<Store>>,
    pub kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let date_time = torchx::specs::format_utc(d.as_secs() as i64).replace(' ', "T");
    format!("{date_time}.{:09}Z", d.subsec_nanos())
}

fn status(code: u16, reason: &str, message: String, name: &str) -> (StatusCode, Value) {
    (
        StatusCode::from_u16(code).unwrap(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "details": {"name": name}, "code": code}),
    )
}

/// `/api/v1/namespaces/{ns}/{plural}[/{name}[/{sub}]]` or the `/apis/{group}/{version}/...` form.
struct Route {
    collection: String,
    ns: String,
    plural: String,
    name: Option<String>,
    sub: Option<String>,
}

fn route(path: &str) -> Option<Route> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let skip = match parts.first() {
        Some(&"api") => 2,
        Some(&"apis") => 3,
        _ => return None,
    };
    let rest = &parts[skip..];
    if rest.len() < 3 || rest[0] != "namespaces" {
        return None;
    }
    Some(Route {
        collection: format!("/{}", parts[..skip + 3].join("/")),
        ns: rest[1].to_string(),
        plural: rest[2].to_string(),
        name: rest.get(3).map(|s| s.to_string()),
        sub: rest.get(4).map(|s| s.to_string()),
    })
}

fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| percent_decode(v))
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn matches_selector(obj: &Value, selector: Option<&str>) -> bool {
    selector.is_none_or(|s| {
        s.split(',')
            .filter(|p| !p.is_empty())
            .all(|p| match p.split_once('=') {
                Some((k, v)) => obj["metadata"]["labels"][k] == v,
                None => obj["metadata"]["labels"].get(p).is_some(),
            })
    })
}

fn merge_patch(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

impl Store {
    fn insert(&mut self, collection: &str, mut obj: Value) -> Value {
        self.uid += 1;
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        obj["metadata"]["uid"] = json!(format!("uid-{}", self.uid));
        obj["metadata"]["creationTimestamp"] = json!(rfc3339(SystemTime::now()));
        obj["metadata"]["resourceVersion"] = json!(self.uid.to_string());
        self.born
            .insert(format!("{collection}/{name}"), Instant::now());
        self.objects
            .entry(collection.to_string())
            .or_default()
            .insert(name, obj.clone());
        obj
    }

    pub fn get(&self, collection: &str, name: &str) -> Option<&Value> {
        self.objects.get(collection)?.get(name)
    }

    fn get_mut(&mut self, collection: &str, name: &str) -> Option<&mut Value> {
        self.objects.get_mut(collection)?.get_mut(name)
    }

    /// Appends a line to a pod's log, stamped now.
    pub fn log(&mut self, ns: &str, pod: &str, line: &str) {
        let text = self.logs.entry(format!("{ns}/{pod}")).or_default();
        text.push_str(&format!("{} {line}\n", rfc3339(SystemTime::now())));
    }

    /// Sets a pod's phase (creating the pod if needed, with these labels).
    pub fn set_pod(&mut self, ns: &str, name: &str, labels: Value, phase: &str) {
        let collection = format!("/api/v1/namespaces/{ns}/pods");
        if self.get(&collection, name).is_none() {
            let pod = json!({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": name, "namespace": ns, "labels": labels}});
            self.insert(&collection, pod);
        }
        if let Some(p) = self.get_mut(&collection, name) {
            p["status"] = json!({"phase": phase});
        }
    }

    /// Merges `status` into an object's status.
    pub fn set_status(&mut self, collection: &str, name: &str, status: Value) {
        if let Some(o) = self.get_mut(collection, name) {
            merge_patch(&mut o["status"], &status);
        }
    }

    fn age(&self, key: &str) -> Duration {
        self.born.get(key).map_or(Duration::ZERO, Instant::elapsed)
    }

    /// The stand-in controllers: advance every object in the `auto` namespace.
    fn tick(&mut self) {
        let jobs = format!("/apis/batch/v1/namespaces/{AUTO}/jobs");
        let vc = format!("/apis/batch.volcano.sh/v1alpha1/namespaces/{AUTO}/jobs");
        let aw = format!("/apis/workload.codeflare.dev/v1beta1/namespaces/{AUTO}/appwrappers");
        for (name, job) in self.objects.get(&jobs).cloned().unwrap_or_default() {
            let tpl = &job["spec"]["template"];
            let n = job["spec"]["completions"].as_u64().unwrap_or(1);
            let pods: Vec<(String, Value)> = (0..n)
                .map(|k| {
                    let mut labels = tpl["metadata"]["labels"].clone();
                    labels["batch.kubernetes.io/job-completion-index"] = json!(k.to_string());
                    labels["job-name"] = json!(name);
                    (format!("{name}-{k}-abcde"), labels)
                })
                .collect();
            let suspended = job["spec"]["suspend"] == true;
            let outcome = self.run_pods(&format!("{jobs}/{name}"), tpl, &pods, suspended);
            let (done, failed): (Vec<_>, Vec<_>) =
                (0..n).partition(|k| outcome[*k as usize] == Some(true));
            let failed: Vec<u64> = failed
                .into_iter()
                .filter(|k| outcome[*k as usize] == Some(false))
                .collect();
            let join = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
            let mut status = json!({"active": if suspended { 0 } else { n - done.len() as u64 - failed.len() as u64 },
                                    "succeeded": done.len(), "failed": failed.len(),
                                    "completedIndexes": join(&done)});
            if done.len() as u64 == n {
                status["conditions"] = json!([{"type": "Complete", "status": "True"}]);
            } else if !failed.is_empty() {
                status["conditions"] = json!([{"type": "Failed", "status": "True",
                    "message": "Job has reached the specified backoff limit"}]);
            }
            self.set_status(&jobs, &name, status);
        }
        for (name, job) in self.objects.get(&vc).cloned().unwrap_or_default() {
            let tasks = job["spec"]["tasks"].as_array().cloned().unwrap_or_default();
            let aborted = job["status"]["state"]["phase"] == "Aborted";
            let mut counts = json!({});
            let mut outcomes = Vec::new();
            for t in &tasks {
                let task = t["name"].as_str().unwrap_or_default();
                let pod = format!("{name}-{task}-0");
                let labels = t["template"]["metadata"]["labels"].clone();
                let o = self.run_pods(
                    &format!("{vc}/{name}"),
                    &t["template"],
                    &[(pod, labels)],
                    aborted,
                );
                let phase = match o[0] {
                    Some(true) => "Succeeded",
                    Some(false) => "Failed",
                    None if self.age(&format!("{vc}/{name}")) < PENDING_FOR => "Pending",
                    None => "Running",
                };
                counts[task] = json!({"phase": {phase: 1}});
                outcomes.push(o[0]);
            }
            if aborted {
                continue;
            }
            let phase = if outcomes.iter().all(|o| *o == Some(true)) {
                "Completed"
            } else if outcomes.contains(&Some(false)) {
                "Failed"
            } else if self.age(&format!("{vc}/{name}")) < PENDING_FOR {
                "Pending"
            } else {
                "Running"
            };
            self.set_status(
                &vc,
                &name,
                json!({"state": {"phase": phase}, "taskStatusCount": counts}),
            );
        }
        for (name, w) in self.objects.get(&aw).cloned().unwrap_or_default() {
            let items = w["spec"]["resources"]["GenericItems"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let mut outcomes = Vec::new();
            for t in items
                .iter()
                .map(|i| &i["generictemplate"])
                .filter(|t| t["kind"] == "Pod")
            {
                let pod = t["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let tpl = json!({"spec": t["spec"]});
                let o = self.run_pods(
                    &format!("{aw}/{name}"),
                    &tpl,
                    &[(pod, t["metadata"]["labels"].clone())],
                    false,
                );
                outcomes.push(o[0]);
            }
            let state = if outcomes.iter().all(|o| *o == Some(true)) {
                "Completed"
            } else if outcomes.contains(&Some(false)) {
                "Failed"
            } else if self.age(&format!("{aw}/{name}")) < PENDING_FOR {
                "Pending"
            } else {
                "Running"
            };
            self.set_status(&aw, &name, json!({"state": state}));
        }
    }

    /// Runs the pods of an owner per the template's `sh -c` script: Some(success) once ended.
    fn run_pods(
        &mut self,
        owner: &str,
        tpl: &Value,
        pods: &[(String, Value)],
        stop: bool,
    ) -> Vec<Option<bool>> {
        let age = self.age(owner);
        let command: Vec<String> = tpl["spec"]["containers"][0]["command"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let script = command.last().cloned().unwrap_or_default();
        let pod_collection = format!("/api/v1/namespaces/{AUTO}/pods");
        let mut out = Vec::new();
        for (pod, labels) in pods {
            if stop {
                if let Some(p) = self.objects.get_mut(&pod_collection) {
                    p.remove(pod);
                }
                out.push(None);
                continue;
            }
            let current = self
                .get(&pod_collection, pod)
                .map(|p| p["status"]["phase"].clone());
            let ended = |p: &Option<Value>| match p.as_ref().and_then(Value::as_str) {
                Some("Succeeded") => Some(true),
                Some("Failed") => Some(false),
                _ => None,
            };
            if let Some(done) = ended(&current) {
                out.push(Some(done));
                continue;
            }
            if age < PENDING_FOR {
                self.set_pod(AUTO, pod, labels.clone(), "Pending");
                out.push(None);
                continue;
            }
            if current.as_ref().and_then(Value::as_str) != Some("Running") {
                self.set_pod(AUTO, pod, labels.clone(), "Running");
            }
            // The script's steps, each logged once the pod has run long enough to reach it.
            let mut reached = PENDING_FOR;
            let mut success = true;
            let mut done = true;
            let written = self
                .logs
                .get(&format!("{AUTO}/{pod}"))
                .map_or(0, |l| l.lines().count());
            let mut echoes = 0;
            for part in script.split(';').map(str::trim) {
                if let Some(secs) = part.strip_prefix("sleep ") {
                    reached = reached.saturating_add(match secs.trim().parse::<u64>() {
                        Ok(s) if s < 60 => Duration::from_secs(s),
                        _ => Duration::MAX, // until cancelled
                    });
                    if age < reached {
                        done = false;
                        break;
                    }
                } else if let Some(text) = part.strip_prefix("echo ") {
                    echoes += 1;
                    if echoes > written {
                        self.log(AUTO, pod, text.trim_matches(|c| c == '\'' || c == '"'));
                    }
                } else if let Some(code) = part.strip_prefix("exit ") {
                    success = code.trim() == "0";
                }
            }
            if !done || age < reached.saturating_add(RUNNING_FOR) {
                out.push(None);
                continue;
            }
            self.set_pod(
                AUTO,
                pod,
                labels.clone(),
                if success { "Succeeded" } else { "Failed" },
            );
            out.push(Some(success));
        }
        out
    }
}

fn full(code: StatusCode, body: Value) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .unwrap()
}

async fn handle(
    store: Arc<Mutex<Store>>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut s = store.lock().unwrap();
    s.requests.push(format!("{method} {path}?{query}"));
    s.tick();
    // The nodes, cluster-scoped: one of 4 CPUs, 16 GiB and no GPU.
    if path == "/api/v1/nodes" && method == Method::GET {
        let v = json!({"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": [
            {"metadata": {"name": "node-a"},
             "status": {"allocatable": {"cpu": "3800m", "memory": "16Gi", "pods": "110"}}}]});
        return Ok(full(StatusCode::OK, v));
    }
    // A namespace, cluster-scoped: `GET /api/v1/namespaces/{ns}`.
    if let Some(ns) = path
        .strip_prefix("/api/v1/namespaces/")
        .filter(|n| !n.contains('/'))
    {
        let held = s
            .objects
            .keys()
            .any(|c| c.contains(&format!("/namespaces/{ns}/")));
        if method == Method::GET && (held || s.namespaces.contains(ns)) {
            let v = json!({"kind": "Namespace", "apiVersion": "v1",
                "metadata": {"name": ns}, "status": {"phase": "Active"}});
            return Ok(full(StatusCode::OK, v));
        }
        let (c, v) = status(
            404,
            "NotFound",
            format!("namespaces \"{ns}\" not found"),
            ns,
        );
        return Ok(full(c, v));
    }
    let Some(r) = route(&path) else {
        let (c, v) = status(404, "NotFound", format!("no route {path}"), "");
        return Ok(full(c, v));
    };
    let not_found = |name: &str| {
        let (c, v) = status(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", r.plural),
            name,
        );
        full(c, v)
    };
    let resp = match (&method, r.name.as_deref(), r.sub.as_deref()) {
        (&Method::POST, None, _) => {
            let obj: Value = serde_json::from_slice(&body).unwrap_or_default();
            let name = obj["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if s.get(&r.collection, &name).is_some() {
                let (c, v) = status(
                    409,
                    "AlreadyExists",
                    format!("{} \"{name}\" already exists", r.plural),
                    &name,
                );
                full(c, v)
            } else {
                let mut obj = obj;
                obj["metadata"]["namespace"] = json!(r.ns);
                // Volcano's controller acts on an AbortJob command at once.
                if obj["kind"] == "Command" && obj["action"] == "AbortJob" {
                    let target = obj["target"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    let vc = format!("/apis/batch.volcano.sh/v1alpha1/namespaces/{}/jobs", r.ns);
                    s.set_status(&vc, &target, json!({"state": {"phase": "Aborted"}}));
                }
                full(StatusCode::CREATED, s.insert(&r.collection, obj))
            }
        }
        (&Method::GET, None, _) => {
            let selector = query_param(&query, "labelSelector");
            let items: Vec<Value> = s
                .objects
                .get(&r.collection)
                .map(|m| {
                    m.values()
                        .filter(|o| matches_selector(o, selector.as_deref()))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            full(
                StatusCode::OK,
                json!({"apiVersion": "v1", "kind": "List",
                                         "metadata": {"resourceVersion": "1"}, "items": items}),
            )
        }
        (&Method::GET, Some(name), Some("log")) => {
            let phase = s
                .get(&r.collection, name)
                .map(|p| p["status"]["phase"].clone());
            if phase.is_none() {
                not_found(name)
            } else if phase.as_ref().is_some_and(|p| p == "Pending") {
                let (c, v) = status(400, "BadRequest",
                    format!("container \"main\" in pod \"{name}\" is waiting to start: ContainerCreating"), name);
                full(c, v)
            } else if query_param(&query, "follow").as_deref() == Some("true") {
                drop(s);
                return Ok(follow_log(
                    store,
                    r.ns.clone(),
                    name.to_string(),
                    r.collection.clone(),
                ));
            } else {
                let text = s
                    .logs
                    .get(&format!("{}/{name}", r.ns))
                    .cloned()
                    .unwrap_or_default();
                Response::builder()
                    .status(200)
                    .body(Full::new(Bytes::from(text)).boxed())
                    .unwrap()
            }
        }
        (&Method::GET, Some(name), _) => match s.get(&r.collection, name) {
            Some(o) => full(StatusCode::OK, o.clone()),
            None => not_found(name),
        },
        (&Method::PATCH, Some(name), _) => {
            let patch: Value = serde_json::from_slice(&body).unwrap_or_default();
            match s.get_mut(&r.collection, name) {
                Some(o) => {
                    merge_patch(o, &patch);
                    full(StatusCode::OK, o.clone())
                }
                None => not_found(name),
            }
        }
        (&Method::DELETE, Some(name), _) => {
            match s
                .objects
                .get_mut(&r.collection)
                .and_then(|m| m.remove(name))
            {
                Some(o) => full(StatusCode::OK, o),
                None => not_found(name),
            }
        }
        _ => {
            let (c, v) = status(405, "MethodNotAllowed", format!("{method} {path}"), "");
            full(c, v)
        }
    };
    Ok(resp)
}

/// Streams a pod's log as it grows, until the pod ends (or is deleted).
fn follow_log(store: Arc<Mutex<Store>>, ns: String, pod: String, pods: String) -> Response<Body> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(16);
    tokio::spawn(async move {
        let mut sent = 0;
        loop {
            let (chunk, over) = {
                let mut s = store.lock().unwrap();
                s.tick();
                let text = s
                    .logs
                    .get(&format!("{ns}/{pod}"))
                    .cloned()
                    .unwrap_or_default();
                let phase = s.get(&pods, &pod).map(|p| p["status"]["phase"].clone());
                let over = match phase {
                    None => true,
                    Some(p) => p == "Succeeded" || p == "Failed",
                };
                (text[sent..].to_string(), over)
            };
            sent += chunk.len();
            // Send lines in two pieces, so that readers must join split lines.
            let mid = chunk.len() / 2;
            let (a, b) = chunk.split_at(
                (0..=mid)
                    .rev()
                    .find(|i| chunk.is_char_boundary(*i))
                    .unwrap_or(0),
            );
            for part in [a, b] {
                if !part.is_empty()
                    && tx
                        .send(Ok(Frame::data(Bytes::from(part.to_string()))))
                        .await
                        .is_err()
                {
                    return;
                }
            }
            if over {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let stream = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    Response::builder()
        .status(200)
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .unwrap()
}

impl FakeKube {
    /// Starts the server on a thread of its own and writes a kubeconfig for it whose context
    /// namespace is `namespace`.
    pub fn start(namespace: &str) -> FakeKube {
        let store = Arc::new(Mutex::new(Store::default()));
        store.lock().unwrap().namespaces = [namespace.to_string(), "default".to_string()]
            .into_iter()
            .collect();
        let served = Arc::clone(&store);
        let addr = super::serve_http(move |req| handle(Arc::clone(&served), req));
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{addr}\n\
                 users:\n- name: tester\n  user:\n    token: fake-token\ncontexts:\n- name: fake\n  context:\n    \
                 cluster: fake\n    user: tester\n    namespace: {namespace}\ncurrent-context: fake\n"
            ),
        )
        .unwrap();
        FakeKube {
            addr,
            store,
            kubeconfig,
            _dir: dir,
        }
    }

    /// The requests so far, as `METHOD path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.store.lock().unwrap().requests.clone()
    }
}
