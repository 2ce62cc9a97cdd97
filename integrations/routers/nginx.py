"""nginx as the traffic router: render a whole nginx.conf, check it, swap it in, reload.

Facts this relies on (measured here; docs/TRITON.md has the router facts too):
* `split_clients` refuses 0%, so zero-weight versions are left out; the last entry is `*`.
* A routed model's `infer`, `generate` and `generate_stream` are split alike (one version
  per request); a stream is passed on unbuffered, each event as Triton sends it. A stream
  its upstream cuts short (no final chunk) is still logged 200 with `$request_completion`
  "OK" (nginx 1.22, measured): only the error log says "upstream prematurely closed", so
  the access log cannot tell a cut stream from a whole one.
* `nginx -s reload` loses no request on new connections; a client reusing a kept-alive
  connection may see it closed at the reload instant before any response byte (safe to
  retry once). A failed reload leaves the old config serving, and `nginx -t` runs first.
* Triton answers unversioned requests with its highest READY version (docs/TRITON.md §versions), so
  every route rewrites, even one at 100%: that pins the baseline before a candidate loads.
* A version served under another model name (`ModelRoute.targets`: a config canary's
  candidate under its sibling name) is rewritten to that name; the log keeps the model's
  name and the version, so every reading of the log stays per model and version.
* gRPC (`grpc_listen`, an http2 listener of its own) is proxied with `grpc_pass` to the
  nodes' gRPC ports and never split: the model and version are fields of the protobuf body,
  which nginx cannot read. Its requests are logged with the gRPC method as the URI.
* Only inference, readiness and metadata pass, over HTTP and gRPC (allowlist.py): nginx
  refuses the rest itself and logs it as refused.
Everything nginx writes (pid, logs, temp files) stays under the driver's prefix folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path

from integrations.routers import allowlist
from integrations.routers.access_log import log_format, sample_format
from integrations.routers.base import (
    ApplyResult,
    ModelRoute,
    RouterError,
    RouterState,
    grpc_address,
    upstream_address,
)

STATUS_PATH = "/__switchyard/router"
# A routed model's unversioned endpoints the router splits by version: inference, and the
# generate extension (one answer, or server-sent events streamed as they come).
SPLIT_ENDPOINTS = ("infer", "generate", "generate_stream")
MIRROR_PATH = "/__switchyard/mirror/"
COPY_PATH = "/__switchyard/copy/"
STATE_MARK = "# switchyard-state: "
_GENERATION = "@@GENERATION@@"
_TEMP_PATHS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
_UNSAFE_PATH_CHARS = set("\"'$;{}\\\n\r\t")
_NO_NODES = """'{"error": "this cluster has no Triton node registered"}\\n'"""


def render_config(
    state: RouterState,
    *,
    listen: str,
    prefix_dir: str | Path,
    user: str | None = None,
    grpc_listen: str = "",
) -> str:
    """The complete nginx.conf for a state; the same inputs always give the same text.
    With `grpc_listen`, a second server passes gRPC through to `state.grpc_upstreams`."""
    prefix = _checked_prefix(prefix_dir)
    host, port = parse_listen(listen)
    grpc = _grpc_blocks(state.grpc_upstreams, grpc_listen) if grpc_listen else []
    text = "\n".join(
        [
            "# Rendered by Switchyard (integrations/routers/nginx.py); apply() overwrites it.",
            STATE_MARK + json.dumps(state.to_json(), sort_keys=True),
            *([f"user {user};"] if user else []),
            "worker_processes 1;",
            "daemon on;",
            f'pid "{prefix}/nginx.pid";',
            f'error_log "{prefix}/logs/error.log" warn;',
            "worker_shutdown_timeout 10s;",
            "events {\n    worker_connections 1024;\n}",
            "http {",
            _indent(_http_settings(prefix)),
            *([_indent(_upstream(state.upstreams))] if state.upstreams else []),
            *(_indent(_split(route, i)) for i, route in enumerate(state.routes)),
            _indent(_server(state.routes, f"{host}:{port}", bool(state.upstreams), prefix)),
            *([_indent(_mirror_server(state.routes, prefix))] if _mirrors(state) else []),
            *(_indent(block) for block in grpc),
            "}",
            "",
        ]
    )
    generation = hashlib.sha256(text.encode()).hexdigest()[:16]
    return text.replace(_GENERATION, generation)


def config_generation(config: str) -> str | None:
    """The generation a rendered config reports on its status location."""
    marker = f"location = {STATUS_PATH} {{"
    if marker not in config:
        return None
    after = config.split(marker, 1)[1]
    return after.split('return 200 "', 1)[1].split("\\n", 1)[0]


def config_state(config: str) -> RouterState | None:
    """The RouterState a rendered config was made from (kept in a comment line)."""
    for line in config.splitlines():
        if line.startswith(STATE_MARK):
            return RouterState.from_json(json.loads(line[len(STATE_MARK) :]))
    return None


def parse_listen(listen: str) -> tuple[str, int]:
    """'127.0.0.1:8080' -> ('127.0.0.1', 8080); the router listens on loopback only."""
    host, _, port = listen.rpartition(":")
    if host != "127.0.0.1" or not port.isdigit() or not 0 < int(port) < 65536:
        raise RouterError(f"Router listen address {listen!r} must be 127.0.0.1:<port>.")
    return host, int(port)


def percent(weight: float) -> str:
    """12.5 -> '12.5%', 80.0 -> '80%': at most two decimals, as split_clients accepts."""
    return f"{weight:.2f}".rstrip("0").rstrip(".") + "%"


def _http_settings(prefix: str) -> str:
    temp = [f'{name}_temp_path "{prefix}/temp/{name}";' for name in _TEMP_PATHS]
    return "\n".join(
        [
            "default_type application/octet-stream;",
            *temp,
            # Inference bodies can be large; Triton enforces its own limits.
            "client_max_body_size 0;",
            "server_tokens off;",
            # Nothing is served from files: nginx's own answers take default_type only.
            "types {}",
            allowlist.refusal_map(),
            f"log_format switchyard escape=json '{log_format()}';",
            f'access_log "{prefix}/logs/access.log" switchyard;',
            f"log_format switchyard_sample escape=json '{sample_format()}';",
            # At most this many mirrored requests at once (the shadow's server); more: 429.
            "limit_conn_zone $sy_mirror zone=sy_mirror:1m;",
        ]
    )


def _upstream(upstreams: list[str]) -> str:
    servers = "".join(f"    server {upstream_address(url)};\n" for url in upstreams)
    return f"upstream triton {{\n{servers}    keepalive 32;\n}}"


def _split(route: ModelRoute, index: int) -> str:
    """The map (sticky only) and split_clients that choose `$sy_version_<index>`."""
    key = "$request_id"
    blocks = [f"# route {index}: {route.model}"]
    if route.pinned_version() is not None:
        blocks[0] += f", pinned to version {route.pinned_version()}"
        return "\n".join([*blocks, *_mirror_picks(route, index)])
    if route.sticky_header:
        header = "$http_" + route.sticky_header.lower().replace("-", "_")
        key = f"$sy_key_{index}"
        # Requests without the header are split per request, not all into one bucket.
        blocks.append(f'map {header} {key} {{\n    "" $request_id;\n    default {header};\n}}')
    live = list(route.live_weights().items())
    entries = [f"    {percent(w)} {v};" for v, w in live[:-1]] + [f"    * {live[-1][0]};"]
    blocks.append(f'split_clients "{key}" $sy_version_{index} {{\n' + "\n".join(entries) + "\n}")
    blocks += _mirror_picks(route, index)
    targets = {v: route.target(v) for v, _ in live if route.target(v) != route.model}
    if targets:  # a version served under another name (a config canary's sibling)
        names = [f"    default {route.model};", *(f"    {v} {n};" for v, n in targets.items())]
        blocks.append(f"map $sy_version_{index} $sy_target_{index} {{\n" + "\n".join(names) + "\n}")
    return "\n".join(blocks)


def _mirror_picks(route: ModelRoute, index: int) -> list[str]:
    """The split_clients that pick the mirrored share of a route's requests, keyed by the
    client request's id (the mirror server gets it as X-Request-Id), and the sampled share
    of the copies (keyed apart, so the two picks are independent); none at 0 or 100 %."""
    out = []
    if 0 < route.mirror < 100:
        picks = f'    {percent(route.mirror)} 1;\n    * "";'
        out.append(f'split_clients "$http_x_request_id" $sy_mirror_pick_{index} {{\n{picks}\n}}')
    if 0 < route.sample < 100:
        picks = f'    {percent(route.sample)} 1;\n    * "";'
        out.append(f'split_clients "${{http_x_request_id}}s" $sy_sample_{index} {{\n{picks}\n}}')
    return out


def _mirrors(state: RouterState) -> bool:
    return bool(state.upstreams) and any(r.mirror for r in state.routes)


def _mirror_socket(prefix: str) -> str:
    """The unix socket of the shadow's server, inside the router's folder."""
    path = f"{prefix}/mirror.sock"
    if len(path.encode()) > 100:  # sun_path holds 108 bytes
        raise RouterError(f"The router folder {prefix!r} is too long for a mirror's socket.")
    return path


def _mirror_location(route: ModelRoute, index: int, prefix: str) -> list[str]:
    """The main server's side of a route's shadow: the mirror subrequest goes to the shadow's
    server, which answers it at once. nginx holds a client's keep-alive connection until
    every mirror subrequest of its last request is done, so a mirror straight to a slow
    candidate would delay the client's next request by the candidate's time (measured:
    202 ms against 0.6 ms behind a 200 ms mirror); the shadow's server copies the request on
    a connection of its own instead (`_mirror_server`)."""
    return [
        f"location = {MIRROR_PATH}{index} {{",
        "    internal;",
        # A subrequest shares the client request's variables and runs the server's defaults
        # again: set back what the client's log line says.
        *_route_variables(route, index),
        f"    proxy_pass http://unix:{_mirror_socket(prefix)};",
        "}",
    ]


def _mirror_server(routes: list[ModelRoute], prefix: str) -> str:
    """The shadow's server (a unix socket in the router's folder). A route's mirrored
    request that its share picks is copied to the mirror version (a subrequest of this
    server's own request, so nothing waits for it on the client's connection) and answered
    at once by `empty_gif` (a 405 to a POST, thrown away); the copy is logged as the model
    and that version with `mirror` 1. Unpicked requests answer 204; nothing is served
    otherwise. At most 64 copies run at once (more are dropped, answered 429)."""
    lines = [
        f"listen unix:{_mirror_socket(prefix)};",
        'set $sy_model "";',
        'set $sy_version "";',
        'set $sy_sticky "";',
        'set $sy_refused "";',
        'set $sy_mirror "1";',
        'set $sy_arm "";',
        "default_type application/json;",
        "proxy_http_version 1.1;",
        'proxy_set_header Connection "";',
        "proxy_set_header X-Request-Id $http_x_request_id;",
        "limit_conn sy_mirror 64;",
        "limit_conn_status 429;",
        "limit_conn_log_level info;",
        # Bodies up to this size stay in memory, so a sampled copy's can be logged.
        "client_body_buffer_size 64k;",
        "client_body_in_single_buffer on;",
    ]
    for index, route in enumerate(routes):
        if route.mirror:
            lines += _mirror_copy(route, index, prefix)
    lines += ["location / {", "    access_log off;", "    return 404;", "}"]
    return _server_block(lines)


def _mirror_copy(route: ModelRoute, index: int, prefix: str) -> list[str]:
    version = route.mirror_version
    sampled = []
    if route.sample:  # a location's access_log replaces the inherited one: both named here
        when = f" if=$sy_sample_{index}" if route.sample < 100 else ""
        sampled = [
            f'    access_log "{prefix}/logs/access.log" switchyard;',
            f'    access_log "{prefix}/logs/samples.log" switchyard_sample{when};',
        ]
    pick = (
        [f'    if ($sy_mirror_pick_{index} = "") {{', "        return 204;", "    }"]
        if route.mirror < 100
        else []
    )
    return [
        f"location = {MIRROR_PATH}{index} {{",
        "    access_log off;",
        *pick,
        f"    mirror {COPY_PATH}{index};",
        "    mirror_request_body on;",
        "    empty_gif;",
        "}",
        f"location = {COPY_PATH}{index} {{",
        "    internal;",
        "    log_subrequest on;",
        *sampled,
        "    proxy_ignore_client_abort on;",
        f'    set $sy_model "{route.model}";',
        f"    set $sy_version {version};",
        f"    rewrite ^ /v2/models/{route.target(version)}/versions/$sy_version/infer break;",
        "    proxy_pass http://triton;",
        "}",
    ]


def _server(routes: list[ModelRoute], listen: str, has_nodes: bool, prefix: str) -> str:
    """The one server block: the status location, the routes, the allowlist (allowlist.py);
    with no node to send to (nginx refuses an empty upstream), allowed requests answer 503
    and say why."""
    lines = [
        f"listen {listen};",
        # Defaults for the log; routed and refusing locations override them.
        'set $sy_model "";',
        'set $sy_version "";',
        'set $sy_sticky "";',
        'set $sy_refused "";',
        'set $sy_mirror "";',
        'set $sy_arm "";',
        # nginx's own answers (refusals, no node) are JSON like Triton's errors.
        "default_type application/json;",
        "proxy_http_version 1.1;",
        'proxy_set_header Connection "";',
        "proxy_set_header X-Request-Id $request_id;",
        f"location = {STATUS_PATH} {{",
        "    access_log off;",
        "    default_type text/plain;",
        f'    return 200 "{_GENERATION}\\n";',
        "}",
    ]
    if not has_nodes:
        return _server_block([*lines, *allowlist.http_locations([f"return 503 {_NO_NODES};"])])
    for index, route in enumerate(routes):
        lines += _route_location(route, index)
        if route.mirror:
            lines += _mirror_location(route, index, prefix)
    lines += allowlist.http_locations(["proxy_pass http://triton;"])
    return _server_block(lines)


def _grpc_blocks(upstreams: list[str], grpc_listen: str) -> list[str]:
    """The gRPC upstream and server: the allowed methods (allowlist.py) pass through to a
    node, unsplit (nginx cannot read the model version out of the protobuf body); the
    others are refused with PERMISSION_DENIED. No node: allowed calls get UNAVAILABLE."""
    host, port = parse_listen(grpc_listen)
    lines = [
        f"listen {host}:{port} http2;",
        'set $sy_model "";',
        'set $sy_version "";',
        'set $sy_sticky "";',
        'set $sy_refused "";',
        'set $sy_mirror "";',
        'set $sy_arm "";',
        # A refusal is a trailers-only gRPC answer: HTTP 200, the status in its headers.
        "default_type application/grpc;",
    ]
    if not upstreams:
        # gRPC clients read HTTP 503 as UNAVAILABLE.
        return [_server_block([*lines, *allowlist.grpc_locations(["return 503;"])])]
    servers = "".join(f"    server {grpc_address(a)};\n" for a in upstreams)
    upstream = f"upstream triton_grpc {{\n{servers}    keepalive 32;\n}}"
    lines += allowlist.grpc_locations(["grpc_pass grpc://triton_grpc;"])
    return [upstream, _server_block(lines)]


def _server_block(lines: list[str]) -> str:
    return "server {\n" + _indent("\n".join(lines)) + "\n}"


def _route_variables(route: ModelRoute, index: int) -> list[str]:
    """The `set` lines naming a routed request's model, version and sticky key (the log's)."""
    pinned = route.pinned_version()
    sticky = "$http_" + route.sticky_header.lower().replace("-", "_") if route.sticky_header else ""
    chosen = pinned or f"$sy_version_{index}"
    if route.served_version is not None:  # a caller's route: the split picks an arm
        version = [f"    set $sy_version {route.served_version};", f"    set $sy_arm {chosen};"]
    else:
        version = [f"    set $sy_version {chosen};"]
    return [
        f'    set $sy_model "{route.model}";',
        *version,
        *([f"    set $sy_sticky {sticky};"] if sticky else []),
    ]


def _route_location(route: ModelRoute, index: int) -> list[str]:
    model = route.model  # [A-Za-z0-9_.-]+: literal in an exact-match location and a rewrite
    pinned = route.pinned_version()
    if pinned is not None:
        target = route.target(pinned)
    elif any(route.target(v) != model for v in route.live_weights()):
        target = f"$sy_target_{index}"
    else:
        target = model
    lines = []
    for endpoint in SPLIT_ENDPOINTS:
        mirrored = route.mirror and endpoint == "infer"  # a shadow copies infer calls only
        lines += [
            f"location = /v2/models/{model}/{endpoint} {{",
            *(f"    {line}" for line in allowlist.method_check("POST")),
            *_route_variables(route, index),
            *(
                [f"    mirror {MIRROR_PATH}{index};", "    mirror_request_body on;"]
                if mirrored
                else []
            ),
            # A stream's events go to the client as Triton sends them, not when it ends.
            *(["    proxy_buffering off;"] if endpoint == "generate_stream" else []),
            f"    rewrite ^ /v2/models/{target}/versions/$sy_version/{endpoint} break;",
            "    proxy_pass http://triton;",
            "}",
        ]
    return lines


def _indent(block: str) -> str:
    return "\n".join(f"    {line}" if line else line for line in block.splitlines())


def _checked_prefix(prefix_dir: str | Path) -> str:
    prefix = str(prefix_dir).rstrip("/")
    if not os.path.isabs(prefix) or _UNSAFE_PATH_CHARS & set(prefix):
        raise RouterError(f"Router prefix {prefix_dir!r} must be an absolute, plain path.")
    return prefix


class NginxRouter:
    """Drives one nginx process of its own, configured and reloaded from a RouterState."""

    name = "nginx"

    def __init__(
        self,
        *,
        prefix_dir: str | Path,
        listen: str,
        nginx_binary: str | None = None,
        ready_timeout_s: float = 10.0,
        grpc_listen: str = "",
    ) -> None:
        self.prefix = Path(_checked_prefix(Path(prefix_dir).absolute()))
        self.host, self.port = parse_listen(listen)
        self.listen = listen
        if grpc_listen:
            parse_listen(grpc_listen)
        self.grpc_listen = grpc_listen
        self.binary = nginx_binary or shutil.which("nginx") or "/usr/sbin/nginx"
        self.ready_timeout_s = ready_timeout_s

    @property
    def config_path(self) -> Path:
        return self.prefix / "nginx.conf"

    @property
    def access_log_path(self) -> Path:
        return self.prefix / "logs" / "access.log"

    @property
    def error_log_path(self) -> Path:
        return self.prefix / "logs" / "error.log"

    def rotate_logs(self, max_bytes: int) -> list[str]:
        """Each of the router's logs (access, samples, error) larger than `max_bytes` moved to
        `<name>.1` (the one before it dropped), and a running nginx told to reopen them, so
        they never fill the disk; the names rotated. Readers of the access log cope: a
        release tick that finds it shorter than its offset reads the new one from its
        start (releases/observe.py)."""
        logs = self.prefix / "logs"
        rotated = []
        for name in ("access.log", "samples.log", "error.log"):
            path = logs / name
            if path.exists() and path.stat().st_size > max_bytes:
                os.replace(path, logs / f"{name}.1")
                rotated.append(name)
        if rotated and self.master_pid() is not None:
            self._nginx("-s", "reopen", what="nginx refused to reopen its logs")
            # The signal is answered at once; the master opens the new files just after
            # (its workers reopen theirs when it tells them: a last line may land in .1).
            deadline = time.monotonic() + 5.0
            while not all((logs / n).exists() for n in rotated) and time.monotonic() < deadline:
                time.sleep(0.02)
        return rotated

    def render(self, state: RouterState) -> str:
        """This router's config for a state (workers run as root only when nginx does)."""
        user = pwd.getpwuid(0).pw_name if os.geteuid() == 0 else None
        return render_config(
            state,
            listen=self.listen,
            prefix_dir=self.prefix,
            user=user,
            grpc_listen=self.grpc_listen,
        )

    def apply(self, state: RouterState) -> ApplyResult:
        """Make `state` the live config; returns once nginx serves it (no-op when it already is)."""
        config = self.render(state)
        generation = config_generation(config)
        running = self.master_pid() is not None
        if running and self._read_config() == config and self.live_generation() == generation:
            return ApplyResult(changed=False, generation=generation)
        self._install(config)
        if running:
            old_workers = _children(self.master_pid() or 0)
            self._nginx("-s", "reload", what="nginx refused to reload")
        else:
            old_workers = []
            self._start()
        self._wait_for_generation(generation)
        self._wait_stopped_accepting(old_workers)
        return ApplyResult(changed=True, generation=generation, started=not running)

    def current(self) -> RouterState | None:
        """The state nginx serves now, or None when it is not running or not in sync."""
        config = self._read_config()
        if self.master_pid() is None or config is None:
            return None
        if self.live_generation() != config_generation(config):
            return None
        return config_state(config)

    def stop(self, timeout_s: float = 15.0) -> None:
        """Quit nginx gracefully, kill what lingers; no process of this router is left."""
        pid = self.master_pid()
        if pid is None:
            return
        workers = _children(pid)
        with contextlib.suppress(RouterError):
            self._nginx("-s", "quit", what="nginx refused to quit")
        if not _wait_gone([pid, *workers], timeout_s):
            for victim in [pid, *workers, *_children(pid)]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim, signal.SIGKILL)
            _wait_gone([pid, *workers], 5.0)
        with contextlib.suppress(FileNotFoundError):
            (self.prefix / "nginx.pid").unlink()

    def master_pid(self) -> int | None:
        """The pid of this router's nginx master when it is alive."""
        try:
            pid = int((self.prefix / "nginx.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _is_alive(pid) and str(self.prefix) in _cmdline(pid) else None

    def live_generation(self, timeout_s: float = 1.0) -> str | None:
        """The generation the running nginx reports, or None when it does not answer."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout_s)
        try:
            conn.request("GET", STATUS_PATH)
            response = conn.getresponse()
            body = response.read().decode(errors="replace").strip()
            return body if response.status == 200 else None
        except OSError:
            return None
        finally:
            conn.close()

    def _install(self, config: str) -> None:
        """Check the config with `nginx -t` from a temp file, then rename it into place."""
        for folder in ("logs", "temp"):
            (self.prefix / folder).mkdir(parents=True, exist_ok=True)
        candidate = self.prefix / f"nginx.conf.{os.getpid()}.tmp"
        candidate.write_text(config)
        try:
            self._nginx("-t", config=candidate, what="nginx refused the router config")
            os.replace(candidate, self.config_path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                candidate.unlink()

    def _start(self) -> None:
        # The daemon may keep inherited descriptors, so its output goes to a file, not a pipe.
        out_path = self.prefix / "logs" / "start.out"
        with open(out_path, "wb") as out:
            rc = subprocess.run(
                _at_data_plane_priority(self._command(self.config_path)),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=30,
            ).returncode
        if rc != 0:
            raise RouterError("nginx did not start.", out_path.read_text(errors="replace"))

    def _nginx(self, *args: str, what: str, config: Path | None = None) -> str:
        cmd = self._command(config or self.config_path, *args)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RouterError(f"{what}.", str(exc)) from exc
        if done.returncode != 0:
            raise RouterError(f"{what}.", done.stderr + done.stdout)
        return done.stderr + done.stdout

    def _command(self, config: Path, *args: str) -> list[str]:
        # -e keeps nginx off its compiled-in /var/log path before it has read the config.
        cli_log = str(self.prefix / "logs" / "nginx-cli.log")
        return [self.binary, "-p", f"{self.prefix}/", "-c", str(config), "-e", cli_log, *args]

    def _read_config(self) -> str | None:
        try:
            return self.config_path.read_text()
        except FileNotFoundError:
            return None

    def _wait_stopped_accepting(self, workers: list[int]) -> None:
        """Until the workers of the previous config take no new connection.

        After a reload the old workers accept connections until they handle their QUIT:
        then they close the listening sockets and retitle themselves "worker process is
        shutting down" (they finish their open requests). Before that, a new request may
        still be routed by the old config, and current() sees the old generation.
        """
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            titles = [_cmdline(pid) for pid in workers if _is_alive(pid)]
            if all(not title or "shutting down" in title for title in titles):
                return
            time.sleep(0.01)

    def _wait_for_generation(self, generation: str | None) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self.live_generation() == generation:
                return
            time.sleep(0.05)
        tail = _tail(self.error_log_path)
        raise RouterError(f"nginx did not serve config {generation} within the timeout.", tail)


def _at_data_plane_priority(cmd: list[str]) -> list[str]:
    """nginx carries inference traffic: started from a control-plane process that runs at a
    lower priority (`make demo` runs the worker at nice 10), it must not inherit that. Linux
    keeps niceness per thread, so this asks about the calling thread. Without the right to
    raise priority, `nice` says so in start.out and runs nginx anyway."""
    niceness = os.getpriority(os.PRIO_PROCESS, 0)
    return ["nice", "-n", str(-niceness), *cmd] if niceness > 0 else cmd


def _is_alive(pid: int) -> bool:
    """True for a running process; a zombie (exited, not yet reaped) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _children(pid: int) -> list[int]:
    """Live processes whose parent is `pid` (nginx workers of a master)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _wait_gone(pids: list[int], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(_is_alive(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return not any(_is_alive(pid) for pid in pids)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
