"""``serve.torchserve``'s program: uploads a model to a TorchServe management API. It copies
the model (any fsspec path) to a temporary directory, serves that over HTTP on ``--port``, and
registers it (``POST {management_api}/models?url=...``) with the given TorchServe parameters.

    python -m torchx.apps.serve.serve --model_path s3://b/m.mar --management_api http://ts:8081
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List

TORCHSERVE_PARAMS = (
    "model_name",
    "handler",
    "runtime",
    "batch_size",
    "max_batch_delay",
    "initial_workers",
    "synchronous",
    "response_timeout",
)


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="uploads the provided model to torchserve")
    parser.add_argument("--model_path", type=str, required=True, help="model to serve")
    parser.add_argument(
        "--management_api",
        type=str,
        required=True,
        help="address of the management api. e.g. http://localhost:8081",
    )
    parser.add_argument("--timeout", type=int, default=60, help="timeout for requests to management api")
    parser.add_argument("--dryrun", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--port",
        type=int,
        default=8222,
        help="port for the HTTP file server to listen on while torchserve loads the model;"
        " it must be reachable from the torchserve instance",
    )
    for param in TORCHSERVE_PARAMS:
        parser.add_argument(
            f"--{param}",
            type=str,
            help=f"torchserve parameter {param}. See https://pytorch.org/serve/management_api.html#register-a-model",
        )
    return parser.parse_args(argv)


def get_routable_ip_to(addr: str) -> str:
    """The local address used to reach the host of URL ``addr``."""
    import socket
    from urllib.parse import urlparse

    parsed = urlparse(addr)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((parsed.hostname or "localhost", parsed.port or 80))
        return str(s.getsockname()[0])


def rand_id() -> str:
    from getpass import getuser

    return f"{getuser()}_{os.urandom(8).hex()}"


def _post(url: str, params: Dict[str, str], timeout: int) -> str:
    """POSTs ``params`` as the query of ``url``: with ``requests`` where it is installed (as
    TorchX, whose Docker dependency brings it), else the standard library's ``urllib``."""
    try:
        import requests
    except ImportError:
        import urllib.parse
        import urllib.request

        request = urllib.request.Request(f"{url}?{urllib.parse.urlencode(params)}", method="POST", data=b"")
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return str(response.read().decode("utf-8", "replace"))
    response = requests.post(url, params=params, timeout=timeout)
    response.raise_for_status()
    return response.text


def main(argv: List[str]) -> None:
    import tempfile
    import threading
    import urllib.parse
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    import fsspec

    args = parse_args(argv)
    if args.dryrun:
        print("App serve started successfully")
        return
    with tempfile.TemporaryDirectory() as tmpdir:
        model_file = f"{args.model_name or 'model'}_{rand_id()}.mar"
        local = os.path.join(tmpdir, model_file)
        print(f"downloading model from {args.model_path} to {local}...")
        fs, _, paths = fsspec.get_fs_token_paths(args.model_path)
        if len(paths) != 1:
            raise SystemExit(f"--model_path must name one file, got {paths}")
        fs.get(paths[0], local)

        server = ThreadingHTTPServer(("", args.port), partial(SimpleHTTPRequestHandler, directory=tmpdir))
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            model_url = f"http://{get_routable_ip_to(args.management_api)}:{server.server_port}/{model_file}"
            print(f"serving file at {model_url}")
            params = {"url": model_url}
            params.update({p: getattr(args, p) for p in TORCHSERVE_PARAMS if getattr(args, p) is not None})
            url = f"{args.management_api}/models"
            print(f"POST {url}?{urllib.parse.urlencode(params)}")
            print(_post(url, params, args.timeout))
        finally:
            server.shutdown()
            server.server_close()


if __name__ == "__main__":
    main(sys.argv[1:])
