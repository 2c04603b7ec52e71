#!/usr/bin/env bash
# up.sh - a real single-node Kubernetes control plane on loopback, built from the Go module
# proxy and Debian's packages only; idempotent.
#
#   bash scripts/k8s/up.sh [--fresh]  # prints KUBECONFIG=<path> as its last line
#
# A cluster this script started that still answers is left as it is (--fresh: start anew,
# empty).
# What runs: etcd (go.etcd.io/etcd/server/v3), kube-apiserver, kube-controller-manager and
# kube-scheduler (k8s.io/kubernetes, through a wrapper module that pins each staging module
# k8s.io/<name> to v0.<minor>.<patch>), on 127.0.0.1, with RBAC, a static admin token and
# service-account tokens; the CRDs torchx submits (Volcano's jobs.batch.volcano.sh and MCAD's
# appwrappers.workload.codeflare.dev, from crates/torchx/src/schedulers/kubernetes/crds) and
# their controllers: Volcano (volcano.sh/volcano: admission webhook, controller manager,
# scheduler) and MCAD (github.com/project-codeflare/multi-cluster-app-dispatcher), each built in
# its own module's source tree.
#
# Built binaries are cached outside the clone, keyed by version ($TORCHX_K8S_CACHE, default
# /var/cache/torchx-k8s): a second start on the same machine takes seconds. State (etcd data,
# certificates, logs, pid files) lives in $TORCHX_K8S_DIR (default /var/lib/torchx-k8s); a start
# always begins with an empty cluster. Stop with scripts/k8s/down.sh.
#
# Then one node (unless TORCHX_K8S_NODE=0): kubelet over Debian's containerd, runc and CNI
# plugins, running real pods of images imported from scripts/docker/up.sh's engine, and cluster
# DNS (a CoreDNS built with the kubernetes plugin, on the node's address).
#
# Not here, and so not proven by what runs on it: kube-proxy (a Service's virtual IP does not
# route; DNS gives pod IPs, which is what headless Services and TorchX's jobs use), more nodes.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.37.2}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}
# The newest releases the Go module proxy serves here (it lists none of either; newer exact
# versions answer 403).
VOLCANO_VERSION=${VOLCANO_VERSION:-1.10.0}
MCAD_VERSION=${MCAD_VERSION:-1.40.0}
COREDNS_VERSION=${COREDNS_VERSION:-1.14.7}
CACHE=${TORCHX_K8S_CACHE:-/var/cache/torchx-k8s}
DIR=${TORCHX_K8S_DIR:-/var/lib/torchx-k8s}
PORT=${TORCHX_K8S_PORT:-6443}
ETCD_PORT=${TORCHX_K8S_ETCD_PORT:-2379}
TIMEOUT=${TORCHX_K8S_TIMEOUT:-120}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=$CACHE/v$K8S_VERSION/bin
etcd_bin=$CACHE/etcd-v$ETCD_VERSION/etcd
run=$DIR/run
pki=$DIR/pki
kubeconfig=$DIR/kubeconfig
token_file=$pki/admin-token

FRESH=0
case "${1:-}" in
    --fresh) FRESH=1 ;;
    "") ;;
    *) echo "usage: bash scripts/k8s/up.sh [--fresh]" >&2; exit 2 ;;
esac
say() { echo "[k8s-up] $*" >&2; }
die() { say "error: $*"; exit 1; }
t0=$(date +%s)
elapsed() { echo "$(($(date +%s) - t0)) s"; }

for tool in go openssl curl; do
    command -v "$tool" >/dev/null || die "$tool is missing (go: the machine's Go toolchain; openssl, curl: apt-get install)"
done

# ---- build (once per version) ------------------------------------------------------------
# A wrapper module: k8s.io/kubernetes cannot be built as a dependency without pinning each of
# its staging modules (its own go.mod replaces them with ./staging/src/...).
build_kubernetes() {
    local src=$CACHE/src-v$K8S_VERSION minor=${K8S_VERSION#1.} mod
    mkdir -p "$src" "$bin"
    say "building Kubernetes v$K8S_VERSION (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet) into $bin; once per version"
    (
        cd "$src"
        printf 'module torchx.local/k8sbuild\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes v%s\n' "$K8S_VERSION" >go.mod
        go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" >/dev/null
        mod=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v$K8S_VERSION.mod
        {
            echo
            echo "replace ("
            awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print "\t" $1 " => " $1 " v0." MINOR }' MINOR="$minor" "$mod"
            echo ")"
        } >>go.mod
        local pkgs=()
        for cmd in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
            pkgs+=("k8s.io/kubernetes/cmd/$cmd")
        done
        go get "${pkgs[@]/%/@v$K8S_VERSION}" >&2
        # The version the binaries report (kubectl, kubelets and clients compare it).
        local ld="-s -w" p
        for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
            ld="$ld -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=${minor%%.*}"
            ld="$ld -X $p.gitTreeState=clean"
        done
        CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$bin/" "${pkgs[@]}"
    )
    say "built Kubernetes in $(elapsed)"
}
build_etcd() {
    local src=$CACHE/etcd-src-v$ETCD_VERSION
    mkdir -p "$src" "$(dirname "$etcd_bin")"
    say "building etcd v$ETCD_VERSION into $etcd_bin; once per version"
    (
        cd "$src"
        printf 'module torchx.local/etcdbuild\n\ngo 1.26.0\n' >go.mod
        go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >&2
        CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$etcd_bin" go.etcd.io/etcd/server/v3
    )
    say "built etcd in $(elapsed)"
}
# A program built in its own module's source tree, so that its go.mod's replace directives
# apply (they do not when it is a dependency): NAME MODULE VERSION PACKAGE... into
# $CACHE/NAME-vVERSION/.
build_in_module() {
    local name=$1 module=$2 version=$3 dir
    shift 3
    local out=$CACHE/$name-v$version src=$CACHE/$name-src-v$version
    say "building $name v$version ($*) into $out; once per version"
    dir=$(cd "$CACHE" && go mod download -json "$module@v$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [ -n "$dir" ] || die "the Go module proxy did not serve $module@v$version"
    rm -rf "$src"
    cp -r "$dir" "$src"
    chmod -R u+w "$src"
    (cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/" "$@")
    say "built $name in $(elapsed)"
}
# CoreDNS with only the plugins cluster DNS needs (its full build pulls every cloud's SDK).
build_coredns() {
    local src=$CACHE/coredns-src-v$COREDNS_VERSION
    mkdir -p "$src"
    say "building CoreDNS v$COREDNS_VERSION into $coredns; once per version"
    (
        cd "$src"
        printf 'module torchx.local/corednsbuild\n\ngo 1.26.0\n' >go.mod
        cat >main.go <<'GO'
// CoreDNS with the plugins a one-node test cluster's DNS needs.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	dnsserver.Directives = []string{"bind", "ready", "health", "errors", "cache", "kubernetes"}
}

func main() { coremain.Run() }
GO
        go get "github.com/coredns/coredns@v$COREDNS_VERSION" >&2
        CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" -o "$coredns" .
    )
    say "built CoreDNS in $(elapsed)"
}
coredns=$CACHE/coredns-v$COREDNS_VERSION/coredns
volcano=$CACHE/volcano-v$VOLCANO_VERSION
mcad=$CACHE/mcad-v$MCAD_VERSION
mkdir -p "$CACHE"
[ -x "$etcd_bin" ] || build_etcd
for b in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
    [ -x "$bin/$b" ] || { build_kubernetes; break; }
done
for b in controller-manager scheduler webhook-manager; do
    [ -x "$volcano/$b" ] || {
        build_in_module volcano volcano.sh/volcano "$VOLCANO_VERSION" \
            ./cmd/controller-manager ./cmd/scheduler ./cmd/webhook-manager
        break
    }
done
[ -x "$coredns" ] || build_coredns
[ -x "$mcad/kar-controllers" ] ||
    build_in_module mcad github.com/project-codeflare/multi-cluster-app-dispatcher "$MCAD_VERSION" ./cmd/kar-controllers

# ---- a cluster already up is kept; else what an earlier start left is stopped ---------------
alive() { [ -f "$run/$1.pid" ] && kill -0 "$(tr -dc 0-9 <"$run/$1.pid")" 2>/dev/null; }
sock=$run/containerd.sock
node_images() {
    # python:local is also TorchX's default image (scripts/docker/up.sh tags it so), which a
    # job that names no image runs: `torchx run -s kubernetes utils.echo --msg hi`.
    local images=(docker.io/library/pause:local docker.io/library/busybox:local) image
    for image in docker.io/library/python:local ghcr.io/pytorch/torchx:0.7.0; do
        if docker image inspect "$image" >/dev/null 2>&1; then images+=("$image"); fi
    done
    echo "${images[@]}"
}
import_node_images() {
    # shellcheck disable=SC2046 # one word per image
    docker save $(node_images) | ctr --address "$sock" -n k8s.io images import - >/dev/null
}
node_has_images() {
    local have
    have=$(ctr --address "$sock" -n k8s.io images ls -q 2>/dev/null) || return 1
    for image in $(node_images); do
        grep -qxF "$image" <<<"$have" || return 1
    done
}
if [ "$FRESH" = 0 ] && [ -s "$kubeconfig" ] && [ -s "$token_file" ] &&
    alive etcd && alive kube-apiserver && alive kube-controller-manager && alive kube-scheduler &&
    alive vc-webhook-manager && alive vc-controller-manager && alive vc-scheduler && alive mcad-controller &&
    { [ "${TORCHX_K8S_NODE:-1}" = 0 ] || { alive coredns && alive containerd && alive kubelet; }; } &&
    curl -sf --cacert "$pki/ca.crt" -H "Authorization: Bearer $(cat "$token_file")" \
        "https://127.0.0.1:$PORT/readyz" >/dev/null 2>&1; then
    if [ "${TORCHX_K8S_NODE:-1}" != 0 ] && ! node_has_images; then
        say "the node lacks some of its images (removed under disk pressure?): importing them again"
        import_node_images
    fi
    say "already running (logs in $run); --fresh to start anew"
    echo "KUBECONFIG=$kubeconfig"
    exit 0
fi
bash "$repo/scripts/k8s/down.sh" >/dev/null 2>&1 || true
rm -rf "$run"
mkdir -p "$run" "$pki"
chmod 700 "$DIR" "$pki"

# ---- certificates and the admin's kubeconfig (kept across starts) --------------------------
if [ ! -s "$pki/apiserver.crt" ]; then
    (
        cd "$pki"
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
            -subj /CN=torchx-test-ca 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr \
            -subj /CN=kube-apiserver 2>/dev/null
        echo "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc" >san.ext
        openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
            -out apiserver.crt -days 3650 -extfile san.ext 2>/dev/null
        openssl genrsa -out sa.key 2048 2>/dev/null
        openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
        openssl rand -hex 24 >admin-token
        echo "$(cat admin-token),torchx-admin,torchx-admin,system:masters" >tokens.csv
        chmod 600 ./*.key admin-token tokens.csv
    )
fi
if [ ! -s "$pki/webhook.crt" ]; then
    (   # Volcano's admission webhook, which the API server calls on 127.0.0.1.
        cd "$pki"
        openssl req -newkey rsa:2048 -nodes -keyout webhook.key -out webhook.csr \
            -subj /CN=volcano-admission 2>/dev/null
        echo "subjectAltName=IP:127.0.0.1" >webhook.ext
        openssl x509 -req -in webhook.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
            -out webhook.crt -days 3650 -extfile webhook.ext 2>/dev/null
        chmod 600 webhook.key
    )
fi
token=$(cat "$token_file")
umask 077
cat >"$kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: torchx-local
  cluster:
    server: https://127.0.0.1:$PORT
    certificate-authority: $pki/ca.crt
users:
- name: torchx-admin
  user:
    token: $token
contexts:
- name: torchx-local
  context:
    cluster: torchx-local
    user: torchx-admin
    namespace: default
current-context: torchx-local
EOF
umask 022

# ---- start: each waits for the one before --------------------------------------------------
start() {
    local name=$1
    shift
    nohup "$@" >"$run/$name.log" 2>&1 &
    echo $! >"$run/$name.pid"
}
wait_ok() {  # URL WHAT [CURL OPTION]: the controllers serve health over self-signed TLS (-k)
    local deadline=$((SECONDS + TIMEOUT))
    until curl -sf --cacert "$pki/ca.crt" ${3:-} -H "Authorization: Bearer $token" "$1" >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            tail -n 30 "$run"/*.log >&2
            die "$2 did not answer at $1 within $TIMEOUT s"
        fi
        sleep 0.2
    done
}
say "starting etcd v$ETCD_VERSION"
start etcd "$etcd_bin" --name torchx --data-dir "$run/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls http://127.0.0.1:$((ETCD_PORT + 1)) \
    --initial-advertise-peer-urls http://127.0.0.1:$((ETCD_PORT + 1)) \
    --initial-cluster "torchx=http://127.0.0.1:$((ETCD_PORT + 1))"
wait_ok "http://127.0.0.1:$ETCD_PORT/health" etcd
say "starting kube-apiserver v$K8S_VERSION"
start kube-apiserver "$bin/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
    --secure-port="$PORT" --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" --token-auth-file="$pki/tokens.csv" --authorization-mode=Node,RBAC \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc --service-cluster-ip-range=10.96.0.0/16 \
    --endpoint-reconciler-type=none --profiling=false --kubelet-preferred-address-types=InternalIP
wait_ok "https://127.0.0.1:$PORT/readyz" kube-apiserver
controller_kubeconfig=$kubeconfig
say "starting kube-controller-manager and kube-scheduler"
start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig="$controller_kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port=10257 \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --use-service-account-credentials=false --controllers='*,-node-ipam-controller'
start kube-scheduler "$bin/kube-scheduler" --kubeconfig="$controller_kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=10259
wait_ok "https://127.0.0.1:10257/healthz" kube-controller-manager -k
wait_ok "https://127.0.0.1:10259/healthz" kube-scheduler -k

# ---- the CRDs torchx submits ---------------------------------------------------------------
api="https://127.0.0.1:$PORT"
get() {  # PATH: the object, as the admin (fails for an error status)
    curl -sf --cacert "$pki/ca.crt" -H "Authorization: Bearer $token" "$api$1"
}
post() {  # PATH FILE CONTENT-TYPE: create, or leave what exists
    code=$(curl -s -o "$run/post.out" -w '%{http_code}' --cacert "$pki/ca.crt" \
        -H "Authorization: Bearer $token" -H "Content-Type: $3" --data-binary "@$2" "$api$1")
    case "$code" in
        201 | 409) ;;
        *) cat "$run/post.out" >&2; die "creating $(basename "$2") answered HTTP $code" ;;
    esac
}
for crd in "$repo"/crates/torchx/src/schedulers/kubernetes/crds/*.yaml; do
    post /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$crd" application/yaml
done
# Established: the API server serves the new kinds.
for crd in jobs.batch.volcano.sh appwrappers.workload.codeflare.dev; do
    deadline=$((SECONDS + TIMEOUT))
    until get "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$crd" |
        grep -q '"type": *"Established"'; do
        [ "$SECONDS" -lt "$deadline" ] || die "CRD $crd was never established"
        sleep 0.2
    done
done
say "Kubernetes v$K8S_VERSION control plane up in $(elapsed) (logs in $run)"

# ---- Volcano: its other CRDs, admission webhook, controllers and scheduler ------------------
# As its Helm chart installs it, but on loopback: the API server calls the webhook by URL.
vc_src=$CACHE/volcano-src-v$VOLCANO_VERSION
for crd in "$vc_src"/installer/helm/chart/volcano/crd/bases/*.yaml; do
    # jobs.batch.volcano.sh is ours (newer, a superset), installed above.
    case "$crd" in */batch.volcano.sh_jobs.yaml) continue ;; esac
    post /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$crd" application/yaml
done
ca_bundle=$(base64 -w0 "$pki/ca.crt")
webhook() {  # KIND PATH NAME RESOURCE GROUP VERSION OPERATIONS...
    local kind=$1 path=$2 name=$3 resource=$4 group=$5 version=$6 collection
    shift 6
    local ops
    ops=$(printf '"%s",' "$@")
    collection=$(echo "$kind" | tr '[:upper:]' '[:lower:]')s
    cat >"$run/webhook.json" <<JSON
{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "$kind",
 "metadata": {"name": "volcano-admission-service${path//\//-}"},
 "webhooks": [{"name": "$name", "admissionReviewVersions": ["v1"], "sideEffects": "NoneOnDryRun",
   "failurePolicy": "Fail", "matchPolicy": "Equivalent", "timeoutSeconds": 10,
   "clientConfig": {"url": "https://127.0.0.1:8443$path", "caBundle": "$ca_bundle"},
   "rules": [{"apiGroups": ["$group"], "apiVersions": ["$version"], "operations": [${ops%,}],
              "resources": ["$resource"], "scope": "*"}]}]}
JSON
    post "/apis/admissionregistration.k8s.io/v1/$collection" "$run/webhook.json" application/json
}
webhook MutatingWebhookConfiguration /jobs/mutate mutatejob.volcano.sh jobs batch.volcano.sh v1alpha1 CREATE
webhook ValidatingWebhookConfiguration /jobs/validate validatejob.volcano.sh jobs batch.volcano.sh v1alpha1 CREATE UPDATE
webhook MutatingWebhookConfiguration /podgroups/mutate mutatepodgroup.volcano.sh podgroups scheduling.volcano.sh v1beta1 CREATE
webhook MutatingWebhookConfiguration /queues/mutate mutatequeue.volcano.sh queues scheduling.volcano.sh v1beta1 CREATE
webhook ValidatingWebhookConfiguration /queues/validate validatequeue.volcano.sh queues scheduling.volcano.sh v1beta1 CREATE UPDATE DELETE
# The Helm chart's scheduler configuration.
cat >"$run/volcano-scheduler.conf" <<'CONF'
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
CONF
say "starting Volcano v$VOLCANO_VERSION (admission webhook, controllers, scheduler)"
start vc-webhook-manager "$volcano/webhook-manager" --kubeconfig="$kubeconfig" \
    --listen-address=127.0.0.1 --port=8443 --webhook-url=https://127.0.0.1:8443 \
    --ca-cert-file="$pki/ca.crt" --tls-cert-file="$pki/webhook.crt" --tls-private-key-file="$pki/webhook.key" \
    --enabled-admission=/jobs/mutate,/jobs/validate,/podgroups/mutate,/queues/mutate,/queues/validate \
    --enable-healthz --healthz-address=127.0.0.1:11253
start vc-controller-manager "$volcano/controller-manager" --kubeconfig="$kubeconfig" --leader-elect=false \
    --controllers=gc-controller,job-controller,pg-controller,queue-controller \
    --enable-healthz --healthz-address=127.0.0.1:11252
start vc-scheduler "$volcano/scheduler" --kubeconfig="$kubeconfig" --leader-elect=false \
    --scheduler-conf="$run/volcano-scheduler.conf" --listen-address=127.0.0.1:8085 \
    --enable-healthz --healthz-address=127.0.0.1:11251
wait_ok https://127.0.0.1:11253/healthz "Volcano's webhook manager"
wait_ok http://127.0.0.1:11252/healthz "Volcano's controller manager"
wait_ok http://127.0.0.1:11251/healthz "Volcano's scheduler"
# Its scheduler makes the queue "default"; a Volcano Job names it.
deadline=$((SECONDS + TIMEOUT))
until get /apis/scheduling.volcano.sh/v1beta1/queues/default >/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || { tail -n 30 "$run/vc-scheduler.log" >&2; die "Volcano's queue default never appeared"; }
    sleep 0.2
done

# ---- MCAD: its other CRDs and its controller (single-cluster "agent" mode, as its chart) -----
mcad_src=$CACHE/mcad-src-v$MCAD_VERSION
for crd in "$mcad_src"/config/crd/bases/*.yaml; do
    case "$crd" in */workload.codeflare.dev_appwrappers.yaml) continue ;; esac  # ours, above
    post /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$crd" application/yaml
done
say "starting MCAD v$MCAD_VERSION"
start mcad-controller "$mcad/kar-controllers" --kubeconfig="$kubeconfig" --logtostderr \
    --secure-port=10262 --healthProbeListenAddr=127.0.0.1:10263
wait_ok http://127.0.0.1:10263/healthz "MCAD's controller"

# ---- a node that runs pods ------------------------------------------------------------------
# kubelet over Debian's containerd, runc and CNI plugins (a bridge on 10.244.0.0/24), its
# images (busybox:local, python:local and a pause image made from busybox) imported from the
# Docker engine of scripts/docker/up.sh. TORCHX_K8S_NODE=0: the control plane alone.
if [ "${TORCHX_K8S_NODE:-1}" != 0 ]; then
    node=$DIR/node
    need=()
    command -v containerd >/dev/null || need+=(containerd)
    command -v runc >/dev/null || need+=(runc)
    [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
    command -v iptables >/dev/null || need+=(iptables)
    if [ "${#need[@]}" -gt 0 ]; then
        say "installing ${need[*]} (apt-get)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >"$run/apt.log" 2>&1 ||
            { tail -n 20 "$run/apt.log" >&2; die "apt-get install ${need[*]} failed"; }
    fi
    docker image inspect busybox:local >/dev/null 2>&1 ||
        die "the node's images come from the Docker engine: run scripts/docker/up.sh and export its DOCKER_HOST first"
    mkdir -p "$node/net.d" "$node/images"
    # The kubelet asks every pod sandbox for oom_score_adj -998; a machine that refuses to lower
    # a process's OOM score (no CAP_SYS_RESOURCE, as in a sandboxed VM) would fail them all:
    # there the runtime raises a negative score to 0 (the pod keeps its parent's score).
    cat >"$node/runc" <<'SH'
#!/bin/sh
bundle= prev=
for a in "$@"; do
    case "$prev" in --bundle | -b) bundle=$a ;; esac
    case "$a" in --bundle=*) bundle=${a#--bundle=} ;; esac
    prev=$a
done
if [ -n "$bundle" ] && [ -f "$bundle/config.json" ] && ! (echo -1 >/proc/self/oom_score_adj) 2>/dev/null; then
    sed -i -E 's/"oomScoreAdj": ?-[0-9]+/"oomScoreAdj":0/' "$bundle/config.json"
fi
exec runc "$@"
SH
    chmod 755 "$node/runc"
    cat >"$node/containerd.toml" <<CONF
version = 2
root = "$node/containerd"
state = "$run/containerd"
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/library/pause:local"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$node/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    BinaryName = "$node/runc"
  # The open registry of scripts/registry/up.sh (workspace images), over plain HTTP on loopback.
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."127.0.0.1:${REGISTRY_PORT:-5055}"]
    endpoint = ["http://127.0.0.1:${REGISTRY_PORT:-5055}"]
CONF
    cat >"$node/net.d/10-torchx.conflist" <<'CONF'
{"cniVersion": "1.0.0", "name": "torchx", "plugins": [
 {"type": "bridge", "bridge": "torchx0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
  "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
 {"type": "portmap", "capabilities": {"portMappings": true}},
 {"type": "loopback"}]}
CONF
    say "starting containerd $(containerd --version | awk '{print $3}')"
    start containerd containerd --config "$node/containerd.toml"
    deadline=$((SECONDS + TIMEOUT))
    until ctr --address "$sock" version >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$deadline" ] || { tail -n 30 "$run/containerd.log" >&2; die "containerd did not answer"; }
        sleep 0.2
    done
    # The images pods run, from the Docker engine: a pause image made from busybox (its shell
    # waits until it is stopped), busybox:local and python:local.
    cat >"$node/images/Dockerfile" <<'CONF'
FROM busybox:local
CMD ["sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"]
CONF
    docker build -q -t docker.io/library/pause:local "$node/images" >/dev/null 2>&1 ||
        die "building the pause image failed"
    import_node_images
    ip=$(hostname -I 2>/dev/null | awk '{print $1}')
    [ -n "$ip" ] || die "this machine has no address for the node (hostname -I)"
    cat >"$node/kubelet.yaml" <<CONF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$sock
address: $ip
port: 10250
readOnlyPort: 0
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
# No eviction for disk: a test node that shares its disk with builds would otherwise delete
# its own images when that disk runs low ("0%" turns a signal off).
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "0%"
  imagefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.inodesFree: "0%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
enforceNodeAllocatable: []
clusterDNS: [$ip]
clusterDomain: cluster.local
serializeImagePulls: false
CONF
    # Cluster DNS: CoreDNS on the node's address (a host process, so no kube-proxy is needed:
    # pods ask it directly; headless Services and pod hostnames resolve to pod IPs).
    cat >"$node/Corefile" <<CONF
.:53 {
    bind $ip
    errors
    health 127.0.0.1:10264
    ready 127.0.0.1:10265
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $kubeconfig torchx-local
        pods insecure
    }
    cache 5
}
CONF
    say "starting CoreDNS v$COREDNS_VERSION on $ip:53"
    start coredns "$coredns" -conf "$node/Corefile"
    wait_ok http://127.0.0.1:10265/ready CoreDNS
    say "starting kubelet (node torchx-node at $ip)"
    start kubelet "$bin/kubelet" --config="$node/kubelet.yaml" --kubeconfig="$kubeconfig" \
        --root-dir="$node/kubelet" --hostname-override=torchx-node --node-ip="$ip"
    deadline=$((SECONDS + TIMEOUT))
    until get /api/v1/nodes/torchx-node | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            tail -n 30 "$run/kubelet.log" >&2
            die "the node never became Ready"
        fi
        sleep 0.5
    done
    say "node torchx-node Ready"
fi
say "Kubernetes v$K8S_VERSION up in $(elapsed); stop with: bash $repo/scripts/k8s/down.sh"
echo "KUBECONFIG=$kubeconfig"
