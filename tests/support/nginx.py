"""A private nginx in front of live servers (tests/support/servers.py), configured as a deployment
is: deploy/nginx/'s two files, included unchanged, around an upstream of the test's servers and
a plain-HTTP server block on a free loopback port in place of deploy/nginx.conf's TLS one.

It runs in the foreground of a process of its own, with its pid, logs and temporary files in the
test's folder, so it never touches the system's nginx or its files.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.launch import ROOT, stop_servers, wait_until_serving
from tests.support.servers import accepts_connections, free_port

DEPLOY = ROOT / "deploy" / "nginx"
# Debian installs it in /usr/sbin, which is not on every user's PATH.
NGINX = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
NEEDS_NGINX = pytest.mark.skipif(NGINX is None, reason="needs nginx (apt-get install nginx)")

CONFIG = """\
{user}pid "{folder}/nginx.pid";
worker_processes 1;
events {{
    worker_connections 1024;
}}
http {{
    access_log "{folder}/access.log";
    client_body_temp_path "{folder}/body";
    proxy_temp_path "{folder}/proxy";
    fastcgi_temp_path "{folder}/fastcgi";
    uwsgi_temp_path "{folder}/uwsgi";
    scgi_temp_path "{folder}/scgi";

    include "{deploy}/chatsite-http.conf";

    upstream chatsite {{
{servers}
        keepalive 8;
    }}

    server {{
        listen 127.0.0.1:{port};
        server_name _;
        include "{deploy}/chatsite-locations.conf";
    }}
}}
"""


@dataclass
class Nginx:
    port: int
    folder: Path

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def error_log(self) -> str:
        path = self.folder / "error.log"
        return path.read_text() if path.exists() else ""


def config(upstreams: Sequence[int], port: int, folder: Path) -> str:
    # Started by root, nginx would run its workers as nobody, who may not write to the test's
    # folder (its temporary files: request bodies over a few KB); they stay whoever runs it.
    user = ""
    if os.geteuid() == 0:
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};\n"
    servers = "\n".join(f"        server 127.0.0.1:{upstream};" for upstream in upstreams)
    return CONFIG.format(user=user, folder=folder, deploy=DEPLOY, servers=servers, port=port)


@contextmanager
def nginx(upstreams: Sequence[int], tmp_path: Path) -> Iterator[Nginx]:
    """nginx in front of the loopback ports `upstreams`, once it accepts connections."""
    assert NGINX is not None, "mark the test with NEEDS_NGINX"
    folder = tmp_path / "nginx"
    folder.mkdir()
    proxy = Nginx(free_port(), folder)
    conf = folder / "nginx.conf"
    conf.write_text(config(upstreams, proxy.port, folder))
    output = folder / "output.log"
    # -e: its own error log from the start, before it has read the configuration.
    command = [NGINX, "-p", f"{folder}/", "-e", str(folder / "error.log"), "-c", str(conf)]
    with output.open("wb") as log:
        process = subprocess.Popen(
            [*command, "-g", "daemon off;"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until_serving(
            process,
            accepts_connections(proxy.port),
            name="nginx",
            log=lambda: output.read_text() + proxy.error_log(),
            timeout=10,
        )
        yield proxy
    finally:
        stop_servers([process], grace=5)
